-- Where a search node's engine CPU goes (issue 15 item 4), part by part,
-- each call timed alone with os.clock (this process's CPU, so other load on
-- the machine counts less): graph:add (Lua record + repo:commit + index
-- line), repo:commit with and without its ref, and proc.run of /bin/true
-- (libuv's fork of the engine, then mk-exec). Median per call with its IQR.
--   mkengine script bench/node_parts_bench.lua [N=1500]
-- Run with TMPDIR=/dev/shm to leave the disk out of the commit's figures.
local fs = require "mk.fs"
local graph = require "mk.search.graph"
local proc = require "mk.proc"
local stats = dofile((arg[0]:match("^(.*)/") or ".") .. "/lib/stats.lua")

local N = tonumber(arg and arg[1]) or 1500
local machine = stats.machine()

-- CPU of each call of fn(i), i = 1..n
local function per_call(n, fn)
  local xs = {}
  for i = 1, n do
    local c = os.clock()
    fn(i)
    xs[i] = os.clock() - c
  end
  return stats.fmt(xs, 1e3, "ms")
end

local function rss_mb() return (tonumber((fs.read("/proc/self/status") or ""):match("VmRSS:%s*(%d+)")) or 0) / 1024 end
local function spawns(label)
  local f = per_call(math.min(N, 500), function() assert(proc.run { argv = { "/bin/true" }, timeout = 10 }.code == 0) end)
  print(string.format("proc.run /bin/true         %s engine CPU (%s, engine RSS %.0f MB)", f, label, rss_mb()))
end
spawns("before the graph")

local function kernel(i) -- 10 KB, different per node
  local t = {}
  for j = 1, 330 do t[j] = string.format("  acc[%d] += x[%d] * w[%d]; /* %d */", j % 64, (i + j) % 4096, j, i) end
  return table.concat(t, "\n"):sub(1, 10240)
end
local ks = {}
for i = 1, N do ks[i] = kernel(i) end

local dir = fs.tmpdir("mk-node-parts") .. "/graph.git"
local g = assert(graph.open(dir))
local prev = g:add { kind = "root", files = { ["kernel.c"] = ks[1] }, metrics = { latency_s = 1e-3 } }
print("graph:add                  " .. per_call(N, function(i)
  prev = assert(g:add { kind = "implement", parents = { prev }, files = { ["kernel.c"] = ks[i] .. "a" },
    plan = "plan " .. i, metrics = { latency_s = 1e-3 / (1 + i % 5), speedup = 1 + i % 5 },
    cost = { input_tokens = 1000 + i, output_tokens = 500 } })
end) .. " CPU per node")
local repo, p = g.repo, prev.oid
local function commits(tag, with_ref)
  return per_call(N, function(i)
    p = assert(repo:commit { files = { ["kernel.c"] = ks[i] .. tag, ["node.json"] = '{"id": ' .. i .. "}\n",
      ["plan.md"] = "plan" }, parents = { p }, message = "x " .. i,
      ref = with_ref and ("refs/nodes/" .. tag .. i) or nil, time = 1796214380 })
  end)
end
print("repo:commit with its ref   " .. commits("b", true) .. " CPU")
print("repo:commit, no ref        " .. commits("c", false) .. " CPU")
spawns("with the graph open")
g:close()
fs.rm_rf(dir:match("^(.*)/graph.git$"))
spawns("after: libuv forks the engine, so the cost grows with its memory")
stats.report(machine)
