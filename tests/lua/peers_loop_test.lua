-- The mkengine side of bench/peers (bench/peers/mkengine_loop.lua) against
-- the loopback test model in its --program mode, the trivial evaluator
-- every system there runs, and bench/lib/stats.lua, which every bench
-- script reports through. The peers themselves are not run here (they are
-- downloaded by bench/peers/run.sh).
local t = dofile("tests/lua/lib/t.lua")
local fs = require "mk.fs"
local proc = require "mk.proc"
local http = require "mk.http"
local graph = require "mk.search.graph"
local fake = dofile("tests/fake_llm/fake.lua")
local stats = dofile("bench/lib/stats.lua")

local MK = fs.realpath((os.getenv("MKENGINE_BUILD") or "build") .. "/mkengine")
local root = t.tmpdir("mk-peers-test")

-- answers of the model since the server started: "COUNT FIRST LAST"
local function calls(srv) return tonumber(assert(http.request { url = srv.url .. "/calls" }).body:match("^(%d+) ")) end

t.test("the node loop makes one model call, one evaluation and one node per iteration, and keeps the best", function()
  local srv = fake.start { bench = true, delay = 0, program = true }
  local ok, err = pcall(function()
    for _, ev in ipairs { "python", "true" } do
      local dir = root .. "/" .. ev
      fs.mkdirs(dir)
      local before = calls(srv)
      local r = assert(proc.run { argv = { MK, "script", "bench/peers/mkengine_loop.lua", "7", "2", srv.url .. "/v1", ev,
        dir }, env = { MK_PEERS_KEY = "loopback-test-key" }, timeout = 120 })
      t.eq(r.code, 0, r.stderr)
      t.eq(calls(srv) - before, 7, "model calls")
      local g = assert(graph.open(dir .. "/graph.git", { readonly = true }))
      t.eq(g:len(), 8, "the root and 7 candidates")
      local best = 0
      for _, n in ipairs(g:nodes()) do
        t.eq(n.status, "ok", ev .. " evaluator, node " .. n.id)
        best = math.max(best, n.metrics.score or 0)
      end
      -- the model's k-th program returns x * k % 97: the best is the highest call number's
      t.contains(r.stdout, "7 iterations, 8 nodes, best score " .. best)
      t.eq(best, before + 7, "the best is the last call's program")
      g:close()
    end
  end)
  srv.stop()
  if not ok then error(err, 0) end
end)

t.test("the loop without its arguments says how to call it", function()
  local r = assert(proc.run { argv = { MK, "script", "bench/peers/mkengine_loop.lua" }, timeout = 60 })
  t.ok(r.code ~= 0, "failed")
  t.contains(r.stderr, "usage: mkengine_loop.lua N K URL")
end)

t.test("the trivial evaluator scores a program and fails a broken one, in both of its output forms", function()
  local good, bad = root .. "/good.py", root .. "/bad.py"
  fs.write(good, "def solve(x):\n    return x * 5\n")
  fs.write(bad, "def solve(x)\n    return x\n")
  local r = assert(proc.run { argv = { "python3", "bench/peers/evaluate.py", "--program_path", good, "--results_dir",
    root .. "/res" } })
  t.eq(r.code, 0, r.stderr)
  t.contains(fs.read(root .. "/res/metrics.json"), '"combined_score": 15.0')
  t.contains(fs.read(root .. "/res/correct.json"), '"correct": true')
  r = assert(proc.run { argv = { "python3", "bench/peers/evaluate.py", "--program_path", bad } })
  t.eq(r.code, 1)
end)

t.test("stats: median and spread over repeats and over samples, and the machine's state", function()
  t.eq(stats.median { 3, 1, 2 }, 2)
  t.eq(stats.median { 4, 1, 3, 2 }, 2.5)
  t.eq(stats.fmt({ 0.003, 0.001, 0.002 }, 1e3, "ms"), "2.00 ms (min-max 1.00-3.00, n=3)")
  local xs = {}
  for i = 1, 11 do xs[i] = i end
  t.eq(stats.fmt(xs, 1, "s"), "6.00 s (IQR 3.50-8.50, n=11)")
  t.eq(stats.fmt({ 0.5 }), "0.500 (n=1)")
  t.eq(stats.fmt({}), "no samples")
  local m = stats.machine(0.1)
  t.matches(m.load, "^%d+%.%d+ %d+%.%d+ %d+%.%d+$")
  t.ok(m.steal >= 0 and m.steal <= 1, "steal share")
  for _, b in ipairs(m.busy) do t.ok(b.share > 0.10 and b.comm ~= "", "busy process " .. tostring(b.comm)) end
  t.matches(stats.describe { load = "1.00 0.50 0.25", busy = { { comm = "cc1", share = 0.9 } }, steal = 0.02 },
    "^load 1%.00 0%.50 0%.25, 1 other busy process %(cc1 90%%%), steal 2%%$")
  local printed
  local line = stats.report(m, function(s) printed = s end)
  t.eq(printed, line)
  t.matches(line, "^machine, .- UTC %(%d+ cores%): before: load .*; after: load ")
end)

local rc = t.run()
fs.rm_rf(root)
return rc
