-- Node commits on a real disk as the graph grows (issue 24 item 3: ≤ 1 ms
-- median per node commit on ext4/XFS after 10,000 commits). graph:add of a
-- node with a 10 KB kernel, N times into one graph under $TMPDIR (point it at
-- a disk, not tmpfs); prints the wall of each block of 1,000 commits
-- (median, IQR) and the engine CPU per commit, so a cost that grows with
-- the graph shows, then the machine's state.
--   TMPDIR=/work/tmp build/mkengine script bench/commit_disk_bench.lua [N=10000]
local fs = require "mk.fs"
local graph = require "mk.search.graph"
local task = require "mk.services.task"
local stats = dofile("bench/lib/stats.lua")

local N = math.tointeger(tonumber(arg and arg[1]) or 10000)
local BLOCK = 1000

local function kernel(i) -- 10 KB, different per node
  local t = {}
  for j = 1, 330 do t[j] = string.format("  acc[%d] += x[%d] * w[%d]; /* %d */", j % 64, (i + j) % 4096, j, i) end
  return table.concat(t, "\n"):sub(1, 10240)
end

local before = stats.machine()
local dir = fs.tmpdir("mk-commit-disk") .. "/graph.git"
print("graph in " .. dir:match("^(.*)/[^/]+/graph.git$"))
local g = assert(graph.open(dir))
local prev = g:add { kind = "root", files = { ["kernel.c"] = kernel(0) }, metrics = { latency_s = 1e-3 } }
local walls, cpu = {}, 0
for i = 1, N do
  local k = kernel(i)
  local t0, c0 = task.now(), os.clock()
  prev = assert(g:add { kind = "implement", key = "k" .. i, parents = { prev }, files = { ["kernel.c"] = k },
    plan = "plan " .. i, metrics = { latency_s = 1e-3 / (1 + i % 5), speedup = 1 + i % 5 },
    cost = { input_tokens = 1000 + i, output_tokens = 500 } })
  cpu = cpu + os.clock() - c0
  walls[#walls + 1] = task.now() - t0
  if i % BLOCK == 0 or i == N then
    print(string.format("commits %5d-%-5d wall %s; %.3f ms CPU per commit", i - #walls + 1, i,
      stats.fmt(walls, 1e3, "ms"), cpu / #walls * 1e3))
    walls, cpu = {}, 0
  end
end
g:close()
fs.rm_rf(dir:match("^(.*)/graph.git$"))
stats.report(before)
