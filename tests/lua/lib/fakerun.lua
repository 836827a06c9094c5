--- Synthetic run directories for report/bench tests: run.json,
--- summary.json and events.jsonl laid out as issue 5 documents, with node
--- events carrying what the graph would hold. Deterministic from `seed`.
local cjson = require "cjson"
local fs = require "mk.fs"

local M = {}

-- A small LCG so the shape does not depend on math.random's state.
local function rng(seed)
  local s = seed % 2147483647
  if s <= 0 then s = s + 2147483646 end
  return function()
    s = (s * 48271) % 2147483647
    return s / 2147483647
  end
end

local STATUSES = { "ok", "ok", "ok", "incorrect", "compile_error", "timeout", "crash" }

--- Write a run dir. opts: dir, nodes (count, default 12), seed, task,
--- strategy, best (target best speedup; nil = no correct node),
--- finished (default true: writes summary.json).
function M.make(opts)
  local dir = assert(opts.dir)
  fs.mkdirs(dir)
  local r = rng(opts.seed or 1)
  local n = opts.nodes or 12
  local task, strategy = opts.task or "softmax", opts.strategy or "beam"
  local ev = {}
  local nodes = {}
  local t = 0
  local best, bestid
  local tin, tout, usd, dev = 0, 0, 0, 0
  for i = 1, n do
    t = t + 1 + r() * 3
    local it, ot = 1000 + math.floor(r() * 500), 200 + math.floor(r() * 100)
    tin, tout, usd = tin + it, tout + ot, usd + it * 1e-6 + ot * 4e-6
    ev[#ev + 1] = { t = t - 0.5, type = "llm", agent = "implement", input_tokens = it, output_tokens = ot, usd = it * 1e-6 + ot * 4e-6 }
    local parent = i > 1 and tostring(math.max(1, math.floor(r() * (i - 1)) + 1)) or nil
    local status = i == 1 and "ok" or STATUSES[1 + math.floor(r() * #STATUSES)]
    if opts.best == nil and i > 1 and status == "ok" then status = "incorrect" end
    if opts.best and i == math.max(1, n - 1) then status = "ok" end
    local speedup
    if status == "ok" then
      speedup = i == 1 and math.min(1.0, opts.best or 1.0) or (0.6 + r() * ((opts.best or 1) - 0.6))
      if opts.best and i == math.max(1, n - 1) then speedup = opts.best end
      if not best or speedup > best then best, bestid = speedup, tostring(i) end
    end
    dev = dev + 0.2
    local node = {
      id = tostring(i), parents = parent and { parent } or {},
      kind = i == 1 and "root" or (status == "compile_error" and "implement" or "fix"),
      status = status,
      metrics = { speedup = speedup, latency_s = speedup and (1e-3 / speedup) or nil },
      cost = { input_tokens = it, output_tokens = ot },
      plan = "Plan " .. i .. ": tile the rows <b>&</b> vectorise </script> safely",
      files = { ["kernel.c"] = "// node " .. i .. "\nvoid k(float *x) { /* </script><script>window.__xss = 1</script> */ }\n" },
      error = status == "compile_error" and "kernel.c:3: error: expected ';'" or nil,
    }
    nodes[#nodes + 1] = node
    ev[#ev + 1] = { t = t, type = "node", node = node }
  end
  local lines = {}
  for i, e in ipairs(ev) do lines[i] = cjson.encode(e) end
  fs.write(dir .. "/events.jsonl", table.concat(lines, "\n") .. "\n")
  fs.write(dir .. "/run.json", cjson.encode({ strategy = strategy, task = task, seed = opts.seed or 1, model = "scripted",
    options = { width = 3 }, status = opts.finished == false and "running" or "done", start = "2026-12-02T12:00:00Z" }))
  local correct = 0
  for _, nd in ipairs(nodes) do if nd.status == "ok" then correct = correct + 1 end end
  local summary = {
    strategy = strategy, task = task, status = "done", nodes = n, correct_nodes = correct,
    best = best and { node = bestid, speedup = best, latency_s = 1e-3 / best } or cjson.null,
    cost = { input_tokens = tin, output_tokens = tout, usd = usd, llm_s = t * 0.6, device_s = dev, wall_s = t + 1 },
    model = "scripted", seed = opts.seed or 1, options = { width = 3 },
  }
  if opts.finished ~= false then fs.write(dir .. "/summary.json", cjson.encode(summary)) end
  summary.best = best and summary.best or nil
  summary.run_dir = dir
  return summary, nodes
end

return M
