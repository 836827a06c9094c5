-- Engine overhead per search node (issue 15 item 4, issue 24): the loop a
-- strategy runs — an LLM call, parsing the reply's code block, one process,
-- a node commit — with a loopback OpenAI-style server that answers at once,
-- so what is left is the engine's own work. N nodes, K in flight, R rounds
-- after a warm-up round, all into one graph (as a run grows it), which
-- first gets PREFILL nodes (10000: the disk goal "after 10,000 commits").
--   mkengine script bench/node_bench.lua [N=300] [K=2] [R=3] [PREFILL=0]
-- Reports engine CPU (this process: os.clock) and wall per node, and the
-- commit's own median (graph:add timed alone inside the loop): the median
-- over R rounds with their spread, and the machine's state. The graph is
-- removed only at the end: on ext4 a directory of files deleted seconds
-- earlier makes every new file's inode allocation skip the recently freed
-- ones (ext4 `recently_deleted`), which a round after a removed round measured.
local fake = dofile("tests/fake_llm/fake.lua")
local rerun = fake.reexec_with_key()
if rerun then return rerun end

local fs = require "mk.fs"
local llm = require "mk.services.llm"
local proc = require "mk.proc"
local task = require "mk.services.task"
local graph = require "mk.search.graph"
local stats = dofile((arg[0]:match("^(.*)/") or ".") .. "/lib/stats.lua")

local N = tonumber(arg[1]) or 300
local K = tonumber(arg[2]) or 2
local R = tonumber(arg[3]) or 3
local PREFILL = math.tointeger(tonumber(arg[4]) or 0)

local srv = fake.start { bench = true, delay = 0 }
local c = llm.client { provider = "openai", model = "delay-0", api_key_env = fake.key_env,
  base_url = srv.url .. "/v1", max_concurrency = K, max_retries = 0, timeout = 30 }

-- a 10 KB kernel per node (every commit writes new blobs)
local function kernel(i)
  local lines = { string.format("/* candidate %d */", i) }
  local len = #lines[1]
  while len < 10240 do
    local l = string.format("  acc%d += x[i + %d] * w[%d]; /* %d */", #lines % 8, #lines, #lines, i)
    lines[#lines + 1] = l
    len = len + #l + 1
  end
  return table.concat(lines, "\n")
end

local dir = fs.tmpdir("mk-node-bench")
local g = assert(graph.open(dir .. "/graph.git", { create = true }))
local root = assert(g:add { parents = {}, kind = "reference", files = { ["kernel.c"] = "void k(void){}\n" },
  status = "ok", metrics = { latency_s = 1e-3, speedup = 1 } })

local function prefill()
  local prev = root
  for i = 1, PREFILL do
    prev = assert(g:add { parents = { prev.id }, kind = "candidate", files = { ["kernel.c"] = kernel(-i) },
      plan = "prefill " .. i, status = "ok", metrics = { latency_s = 1e-3 / (1 + i % 7), speedup = 1 + i % 7 } })
  end
end

local function round(r)
  local commits, kernels = {}, {}
  for i = 1, N do kernels[i] = kernel(r * 1000000 + i) end -- made before the clock starts; new blobs every round
  local next_i = 0
  local function worker()
    while next_i < N do
      next_i = next_i + 1
      local i = next_i
      local reply, cerr = c:chat { messages = { { role = "user", content = "write candidate " .. i } }, stream = true }
      if not reply then error("chat: " .. tostring(cerr and cerr.message), 0) end
      -- the server echoes the prompt; the node's file is a 10 KB kernel
      local code = reply.text:match("candidate (%d+)") and kernels[i] or error("unexpected reply " .. reply.text)
      local p, perr = proc.run { argv = { "/bin/true" }, timeout = 10 }
      if not p or p.code ~= 0 then error("proc: " .. tostring(perr and perr.message), 0) end
      local t0 = task.now()
      local node, aerr = g:add { parents = { root.id }, kind = "candidate", files = { ["kernel.c"] = code },
        plan = "plan " .. i, status = "ok", metrics = { latency_s = 1e-3 / (1 + i % 7), speedup = 1 + i % 7 } }
      if not node then error("graph:add: " .. tostring(aerr and aerr.message), 0) end
      commits[#commits + 1] = task.now() - t0
    end
  end
  local cpu0, w0 = os.clock(), task.now()
  local hs = {}
  for k = 1, K do hs[k] = task.spawn(worker) end
  task.gather(hs)
  local wall, cpu = task.now() - w0, os.clock() - cpu0
  print(string.format("round %d: %d nodes, %d in flight: %.3f ms wall and %.3f ms engine CPU per node; "
    .. "commit median %.3f ms; graph %d nodes", r, N, K, wall / N * 1e3, cpu / N * 1e3, stats.median(commits) * 1e3,
    g:len()))
  return wall / N, cpu / N, stats.median(commits)
end

local machine = stats.machine()
print("graph in " .. (os.getenv("TMPDIR") or "/tmp"))
if PREFILL > 0 then
  local t0 = task.now()
  prefill()
  print(string.format("prefilled %d nodes in %.1f s", PREFILL, task.now() - t0))
end
round(0) -- warm-up: connections, page cache
local ws, cs, ms = {}, {}, {}
for r = 1, R do ws[r], cs[r], ms[r] = round(r) end
print(string.format("per node: wall %s (target 2 on tmpfs, 3 on disk after 10,000), engine CPU %s (target 1); "
  .. "commit median %s", stats.fmt(ws, 1e3, "ms"), stats.fmt(cs, 1e3, "ms"), stats.fmt(ms, 1e3, "ms")))
stats.report(machine)
g:close()
fs.rm_rf(dir)
srv.stop()
