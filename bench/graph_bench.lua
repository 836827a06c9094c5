-- Benchmark of mk.search.graph (issue 5 targets: one node commit with a 10 KB
-- kernel, median under 1 ms; a 100,000-node graph loads in under 2 s and
-- under 500 MB RSS).
--
--   mkengine script bench/graph_bench.lua            commit + load (100,000)
--   mkengine script bench/graph_bench.lua commit     commit latency only
--   mkengine script bench/graph_bench.lua load N [KEEP_DIR]   build an N-node graph, time loading it
--   mkengine script bench/graph_bench.lua open DIR [index|verify]   (internal: one load, fresh process;
--     index: ignore the binary snapshot; verify: also compare every ref, as resume does)
local fs = require "mk.fs"
local git = require "mk.git"
local graph = require "mk.search.graph"
local task = require "mk.services.task"
local stats = dofile((arg[0]:match("^(.*)/") or ".") .. "/lib/stats.lua")

local MK = (os.getenv("MKENGINE_BUILD") or "build") .. "/mkengine"
local mode = arg[1] or "all"

local function rss_mb()
  local s = fs.read("/proc/self/status") or ""
  return (tonumber(s:match("VmRSS:%s*(%d+)")) or 0) / 1024, (tonumber(s:match("VmHWM:%s*(%d+)")) or 0) / 1024
end

-- a 10 KB kernel that differs per node (so every commit writes a new blob)
local function kernel(i)
  local lines = { string.format("/* candidate %d */", i) }
  local size = #lines[1]
  local j = 0
  while size < 10 * 1024 do
    j = j + 1
    local l = string.format("  acc[%d] += x[%d] * w[%d]; /* %d */", j % 64, (i + j) % 4096, j, i)
    lines[#lines + 1] = l
    size = size + #l + 1
  end
  return table.concat(lines, "\n"):sub(1, 10 * 1024)
end

local function bench_commit(n, sync)
  local dir = fs.tmpdir("mk-graph-bench") .. "/graph.git"
  local g = assert(graph.open(dir, { sync = sync }))
  local prev = g:add{ kind = "root", files = { ["kernel.c"] = kernel(0) }, metrics = { latency_s = 1e-3 } }
  local times = {}
  local c0 = os.clock()
  for i = 1, n do
    local k = kernel(i)
    local t0 = task.now()
    prev = g:add{ kind = "implement", key = "k" .. i, parents = { prev }, files = { ["kernel.c"] = k },
      plan = "plan " .. i, metrics = { latency_s = 1e-3 / (1 + i % 5), speedup = 1 + i % 5 },
      cost = { input_tokens = 1000 + i, output_tokens = 500 } }
    times[#times + 1] = task.now() - t0
  end
  local cpu = (os.clock() - c0) / n
  g:close()
  git.fsync(false)
  fs.rm_rf(dir:match("^(.*)/graph.git$"))
  return times, cpu
end

-- How fast this machine runs plain Lua right now (shared machines vary):
-- 10^8 additions take about 0.3 s on an idle current x86 core.
local function calibrate()
  local c0 = os.clock()
  local x = 0
  for i = 1, 100000000 do x = x + i end
  return os.clock() - c0, x
end

-- Write an n-node graph in mk.search.graph's format quickly: objects via `git
-- fast-import` (one pack instead of 300,000 loose objects), refs/nodes/* as
-- one packed-refs file (what graph:close leaves), then graph.open rebuilds
-- the index from the refs, as it does when the index is lost.
local function build(n, dir)
  local json = require "cjson"
  assert(git.init(dir)):close()
  local t0 = task.now()
  local marks = dir .. "/../marks"
  local p = assert(io.popen("git --git-dir " .. dir .. " fast-import --quiet --export-marks=" .. marks, "w"))
  local function data(s) p:write("data ", #s, "\n", s, "\n") end
  local small = "int k(void) { return 0; }\n"
  p:write("blob\nmark :1\n")
  data(small)
  for i = 1, n do
    local id = string.format("n%04d", i)
    local parent = i > 1 and ((i - 1) // 2 + 1) or nil
    local node = json.encode{ id = id, key = "step/" .. i, kind = i == 1 and "root" or "implement",
      status = i % 3 == 0 and "incorrect" or "ok", parents = parent and { string.format("n%04d", parent) } or nil,
      metrics = { latency_s = 1e-3 * (1 + (i * 7919 % 1000) / 1000), speedup = 1.5, correct = i % 3 ~= 0 },
      cost = { input_tokens = 1200, output_tokens = 800, usd = 0.002 }, meta = { depth = i // 2, branch = i % 2 },
      time = 1796214380 + i, files = { "kernel.c" } }
    if not parent then p:write("reset refs/heads/import\n") end
    p:write("commit refs/heads/import\nmark :", i + 1, "\n")
    p:write("committer mkengine <mkengine@localhost> ", 1796214380 + i, " +0000\n")
    data(string.format("%s %s ok\n", id, i == 1 and "root" or "implement"))
    if parent then p:write("from :", parent + 1, "\n") end
    p:write("M 100644 :1 kernel.c\nM 100644 inline node.json\n")
    data(node)
  end
  assert(p:close())
  local refs = {}
  for line in assert(fs.read(marks)):gmatch("[^\n]+") do
    local m, oid = line:match("^:(%d+) (%x+)$")
    m = tonumber(m)
    if m and m > 1 then refs[#refs + 1] = oid .. " refs/nodes/" .. string.format("n%04d", m - 1) end
  end
  table.sort(refs, function(a, b) return a:sub(42) < b:sub(42) end)
  assert(fs.write(dir .. "/packed-refs", "# pack-refs with: peeled fully-peeled sorted \n" .. table.concat(refs, "\n") .. "\n"))
  os.execute("git --git-dir " .. dir .. " update-ref -d refs/heads/import")
  local t1 = task.now()
  local g = assert(graph.open(dir))
  local t2 = task.now()
  local nodes = g:len()
  g:close()
  return t1 - t0, t2 - t1, nodes
end

if mode == "open" then
  local t0, c0 = task.now(), os.clock()
  local how = arg[3]
  local g = assert(graph.open(arg[2], { readonly = how ~= "verify", verify = how == "verify", snapshot = how ~= "index" }))
  local dt, cpu = task.now() - t0, os.clock() - c0
  local rss, hwm = rss_mb()
  print(string.format("open %d nodes: wall %.3f s, cpu %.3f s, rss %.1f MB, peak %.1f MB, best %s, problems %d%s",
    g:len(), dt, cpu, rss, hwm, g:best() and g:best().id or "-", #g.problems, g.snap_count and " (snapshot)" or ""))
  return 0
end

local machine = stats.machine()
print(string.format("calibration: 10^8 Lua additions in %.2f s cpu; graph in %s", calibrate(),
  os.getenv("TMPDIR") or "/tmp"))

if mode == "all" or mode == "commit" then
  local n = tonumber(mode == "commit" and arg[2]) or 2000
  local times, cpu = bench_commit(n, false)
  print(string.format("commit, 10 KB kernel, %d nodes, no fsync: wall %s, p90 %.3f ms; %.3f ms cpu per commit (mean)",
    n, stats.fmt(times, 1e3, "ms"), stats.quantile(times, 0.9) * 1e3, cpu * 1e3))
  local ns = math.min(n, 300)
  local stimes, scpu = bench_commit(ns, true)
  print(string.format("commit, 10 KB kernel, %d nodes, fsync on: wall %s, p90 %.3f ms; %.3f ms cpu per commit (mean)",
    ns, stats.fmt(stimes, 1e3, "ms"), stats.quantile(stimes, 0.9) * 1e3, scpu * 1e3))
end

if mode == "all" or mode == "load" then
  local n = tonumber(mode == "load" and arg[2]) or 100000
  local keep = mode == "load" and arg[3]
  local base = keep or fs.tmpdir("mk-graph-bench")
  local dir = base .. "/graph.git"
  if keep and fs.exists(dir .. "/nodes.jsonl") then
    print("reusing the graph in " .. dir)
  else
    local import_s, rebuild_s, nodes = build(n, dir)
    print(string.format("wrote %d nodes with git fast-import in %.1f s; graph.open rebuilt the index from refs in %.1f s",
      nodes, import_s, rebuild_s))
  end
  local walls, cpus, rss = {}, {}, {}
  for _, how in ipairs{ "", "", "", "index", "verify" } do
    local p = io.popen(string.format("%s script %s open %s %s", MK, arg[0], dir, how))
    local out = p:read("a")
    p:close()
    io.stdout:write(how ~= "" and ("(" .. how .. ") ") or "", out)
    local w, c, r = out:match("wall ([%d.]+) s, cpu ([%d.]+) s, rss ([%d.]+) MB")
    if how == "" and w then walls[#walls + 1], cpus[#cpus + 1], rss[#rss + 1] = tonumber(w), tonumber(c), tonumber(r) end
  end
  print(string.format("open from the snapshot, fresh processes: wall %s, cpu %s, rss %s", stats.fmt(walls, 1, "s"),
    stats.fmt(cpus, 1, "s"), stats.fmt(rss, 1, "MB")))
  local du = io.popen("du -sh " .. dir)
  io.stdout:write("repository size: ", du:read("a"))
  du:close()
  if not keep then fs.rm_rf(base) end
end
stats.report(machine)
return 0
