--- mkengine show RUN [NODE]: the nodes of a run, one line each, or one node
--- in full (plan, files, metrics, error). Reads only; safe on a live run.
local cli = require("mk.cli")
local figure = require("mk.search.figure")
local graph = require("mk.search.graph")
local rundir = require("mk.search.rundir")
local json = require("cjson").new()

local M = {
  summary = "list a run's nodes, or show one node (plan, code, metrics, error)",
  usage = "usage: mkengine show RUN [NODE] [--json]",
  help = [[
RUN is a run directory (runs/<time>-<strategy>-<task>). Without NODE, prints
one line per node: id, parents, kind, status, latency, speedup, tokens, and
how the figure was measured; the best node is marked with '*'. With NODE
(an id like n0004 or 4, 'best', 'root', a step key or a commit prefix),
prints its plan, files, metrics, cost and the error it got. --json prints
the same data as JSON.

A kernel has one figure: nodes with identical files share a measurement
record, and every node of it shows the median of all its measurements
(with their range); the latest node of the source holds it, and older
ones say "same kernel as" it. The best node is the one summary.json names
once the run has ended (held-out checked, ties re-measured), else the
fastest kernel so far. Nothing in the run is modified, so this is safe
while the run is going.]],
}

--- Open a run for reading, turning every failure into an input error.
function M.open_run(dir, usage)
  if not dir then cli.usage_error("missing RUN directory", usage) end
  local run, err = rundir.open(dir, { readonly = true })
  if not run then cli.input_error(err.message) end
  return run
end

--- Find a node or fail with an input error naming the run.
function M.node(run, s)
  local n
  if s == "best" then -- the kernel the run names best, by its pooled figure (not the graph's first figures)
    n = select(2, M.figures(run))
  else
    n = run.graph:resolve(s)
  end
  if not n then
    cli.input_error(string.format("no node '%s' in %s (%d nodes: %s)", s, run.dir, run.graph:len(),
      run.graph:len() > 0 and (run.graph.list[1].id .. " .. " .. run.graph.list[#run.graph.list].id) or "none"))
  end
  return n
end

local function sorted_pairs(t)
  local keys = {}
  for k in pairs(t or {}) do keys[#keys + 1] = k end
  table.sort(keys, function(a, b) return tostring(a) < tostring(b) end)
  local i = 0
  return function()
    i = i + 1
    if keys[i] ~= nil then return keys[i], t[keys[i]] end
  end
end

local function value(v)
  if type(v) == "table" then return rundir.encode(v) end
  if math.type(v) == "float" then return string.format("%.6g", v) end
  return tostring(v)
end

--- The figures of a run's kernels (mk.search.figure.of_run): the pool, the
--- best node, and whether the run declared it (it ended).
function M.figures(run)
  return figure.of_run(run.dir, run.graph.list, run.info)
end

--- How a node's figure was measured, in a few words: "3× 1.10–1.31 ms",
--- "same kernel as n0003", "contended" (every benchmark of it was taken
--- while another process held the CPU), or "" for one measurement.
function M.measured(pool, n)
  local f, holder = pool:of(n)
  if not f then return "" end
  if holder then return "same kernel as " .. holder end
  local parts = {}
  if (f.measurements or 1) > 1 then
    parts[1] = string.format("%d× %s–%s", f.measurements, graph.format_latency(f.latency_min_s),
      graph.format_latency(f.latency_max_s))
  end
  if f.contended then parts[#parts + 1] = "contended" end
  return table.concat(parts, ", ")
end

-- A node's figure for display: its kernel's (pooled), else its own metrics.
local function shown(pool, n)
  local f = pool:of(n)
  if f then return f end
  return n.metrics
end

local function list(run, as_json)
  local g = run.graph
  local pool, best = M.figures(run)
  if as_json then
    local out = {}
    for i, n in ipairs(g.list) do
      local f, holder = pool:of(n)
      local m = f or n.metrics
      out[i] = { id = n.id, parents = n.parents, kind = n.kind, status = n.status, key = n.key,
        latency_s = m.latency_s, speedup = m.speedup, measurements = f and f.measurements,
        latency_min_s = f and f.latency_min_s, latency_max_s = f and f.latency_max_s, same_as = holder,
        contended = f and f.contended, tokens = n:tokens(), best = (n == best) or nil }
    end
    print(rundir.encode({ run = run.dir, info = run.info, nodes = out, best = best and best.id or json.null }))
    return 0
  end
  local info = run.info
  print(string.format("run %s: strategy %s, task %s, status %s, %d nodes, best %s", run.dir,
    tostring(info.strategy), tostring(info.task), tostring(info.status), g:len(),
    best and (best.id .. " " .. graph.format_speedup(shown(pool, best).speedup)) or "none"))
  print(string.format("  %-7s %-15s %-10s %-14s %12s %8s %8s  %s", "id", "parents", "kind", "status", "latency",
    "speedup", "tokens", "measured"))
  for _, n in ipairs(g.list) do
    local parents = #n.parents > 0 and table.concat(n.parents, ",") or "-"
    local m = shown(pool, n)
    print((string.format("%s %-7s %-15s %-10s %-14s %12s %8s %8d  %s", n == best and "*" or " ", n.id, parents,
      n.kind, n.status, graph.format_latency(m.latency_s), graph.format_speedup(m.speedup), n:tokens(),
      M.measured(pool, n)):gsub("%s+$", "")))
  end
  for _, p in ipairs(g.problems) do io.stderr:write("note: ", p, "\n") end
  return 0
end

-- The figure line of one node: its kernel's figure and where it is held.
local function figure_line(pool, n)
  local f, holder = pool:of(n)
  if not f then return nil end
  local what = string.format("%s %s", graph.format_latency(f.latency_s), graph.format_speedup(f.speedup))
  local how = (f.measurements or 1) > 1 and string.format("median of %d measurements, %s–%s", f.measurements,
    graph.format_latency(f.latency_min_s), graph.format_latency(f.latency_max_s)) or "one measurement"
  if f.contended then how = how .. "; taken under contention: " .. tostring(f.contended) end
  if holder then
    return string.format("same kernel as %s, see there: %s (%s); this node's commit holds %s, measured before",
      holder, what, how, graph.format_latency(n.metrics.latency_s))
  end
  return string.format("%s (%s)", what, how)
end

local function one(run, n, as_json)
  local g = run.graph
  local pool, best = M.figures(run)
  local fig, holder = pool:of(n)
  local files = {}
  for _, name in ipairs(n:files()) do files[name] = n:file(name) end
  if as_json then
    print(rundir.encode({ id = n.id, oid = n.oid, key = n.key, kind = n.kind, status = n.status,
      parents = n.parents, children = (function()
        local c = {}
        for i, x in ipairs(g:children(n)) do c[i] = x.id end
        return c
      end)(), metrics = n.metrics, figure = fig or json.null, same_as = holder, cost = n.cost, meta = n.meta,
      plan = n.plan or json.null, error = n.error or json.null, files = files, best = (best == n) }))
    return 0
  end
  local kids = {}
  for i, c in ipairs(g:children(n)) do kids[i] = c.id end
  print(string.format("node %s%s  (commit %s)", n.id, best == n and "  * best" or "", n.oid))
  print("  kind:     " .. n.kind)
  print("  status:   " .. n.status)
  print("  parents:  " .. (#n.parents > 0 and table.concat(n.parents, " ") or "-"))
  print("  children: " .. (#kids > 0 and table.concat(kids, " ") or "-"))
  if n.key then print("  key:      " .. n.key) end
  if n.time then print("  time:     " .. os.date("!%Y-%m-%d %H:%M:%SZ", n.time)) end
  local fl = figure_line(pool, n)
  if fl then print("  figure:   " .. fl) end
  local function section(title, t)
    if next(t or {}) == nil then return end
    print("\n" .. title .. ":")
    for k, v in sorted_pairs(t) do print(string.format("  %-20s %s", k, value(v))) end
  end
  section("metrics", n.metrics)
  section("cost", n.cost)
  section("meta", n.meta)
  local plan = n.plan
  if plan then print("\nplan:\n" .. plan:gsub("\n$", "")) end
  local err = n.error or n.meta.error or n.metrics.message
  if err then print("\nerror:\n" .. tostring(err):gsub("\n$", "")) end
  for _, f in ipairs(n:files()) do
    print(string.format("\n--- %s ---", f))
    io.stdout:write(files[f] or "", (files[f] or ""):sub(-1) == "\n" and "" or "\n")
  end
  return 0
end

function M.run(args)
  local opts, pos = cli.parse(args, { flags = { json = true } }, M.usage)
  if #pos > 2 then cli.usage_error("too many arguments", M.usage) end
  local run = M.open_run(pos[1], M.usage)
  local code
  if pos[2] then
    code = one(run, M.node(run, pos[2]), opts.json)
  else
    code = list(run, opts.json)
  end
  run:close()
  return code
end

return M
