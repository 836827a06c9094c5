-- The researcher's path end to end, through the real CLI and evaluator on
-- the offline scripted model: a halving strategy written from
-- docs/strategies.md alone (examples/strategies/halving.lua), swept over 3
-- values x 2 seeds with `mkengine sweep`; what it prints, results.json and
-- the report must agree on the per-value medians. Also the strategy
-- contract as the runner enforces it (bad return values, a returned node).
local t = dofile("tests/lua/lib/t.lua")
local fs = require "mk.fs"
local proc = require "mk.proc"
local cjson = require "cjson"

local MK = fs.realpath((os.getenv("MKENGINE_BUILD") or "build") .. "/mkengine")
local TASK = "tests/tasks/rmsnorm_small"
local tmp = t.tmpdir("mk-researcher-test")

local function mk(args)
  local argv = { MK }
  for _, a in ipairs(args) do argv[#argv + 1] = a end
  local r = assert(proc.run { argv = argv, timeout = 1200, max_output = 4 * 1024 * 1024 })
  return r.code, r.stdout, r.stderr
end

local function median(xs)
  table.sort(xs)
  local n = #xs
  return n % 2 == 1 and xs[(n + 1) // 2] or (xs[n // 2] + xs[n // 2 + 1]) / 2
end

t.test("a halving strategy swept over 3 values x 2 seeds prints and reports the right per-value medians", function()
  local out = tmp .. "/sweep"
  local code, stdout, stderr = mk { "sweep", "examples/sweeps/halving_n.lua", "--model", "scripted", "--out", out }
  t.eq(code, 0, stderr)
  local r = cjson.decode(assert(fs.read(out .. "/results.json")))
  t.eq(#r.entries, 6)
  local by = {}
  for _, e in ipairs(r.entries) do
    t.eq(e.error, nil, "run " .. e.label .. " failed")
    local n = math.tointeger(e.params.set.n)
    local best = e.summary.best
    by[n] = by[n] or {}
    table.insert(by[n], type(best) == "table" and best.speedup or 1.0)
  end
  local report = require "mk.study.report"
  local html = report.html(assert(report.load(out)))
  for _, n in ipairs({ 1, 2, 3 }) do
    t.eq(#by[n], 2, "two seeds of n=" .. n)
    local m = median(by[n])
    t.contains(stdout, string.format("n=%d median best %.4fx", n, m))
    t.eq(#r.returned, 3)
    t.near(r.returned[n].median_best, m, 1e-9)
    -- the grouped table of mkengine sweep and of the report
    t.matches(stdout, string.format("n +%d +median +%s", n, string.format("%.2fx", m):gsub("%.", "%%.")))
    t.contains(html, string.format('<td class="l">n</td><td class="l">%d</td><td>%.2f×</td>', n, m))
  end
end)

t.test("run() returning something other than a node or nil is a warning naming the strategy's file:line", function()
  local path = tmp .. "/returns_42.lua"
  fs.write(path, "return { defaults = {}, run = function(ctx, opts) return 42 end }\n")
  local code, _, stderr = mk { "run", path, TASK, "--model", "scripted", "--set", "tests_agent=false", "--root", tmp .. "/r42",
    "--quiet" }
  t.eq(code, 1) -- it made no kernel: the run ends without one, not failed
  t.contains(stderr, "strategy " .. path .. ":1: run() must return a node of the graph or nil, got number 42")
  local dirs = fs.list(tmp .. "/r42")
  t.eq(#dirs, 1)
  t.eq(cjson.decode(fs.read(tmp .. "/r42/" .. dirs[1] .. "/summary.json")).status, "no_correct_kernel")
end)

t.test("the node run() returns is what the run reports, not the graph's fastest", function()
  local path = tmp .. "/slowest.lua"
  fs.write(path, [[
return { defaults = {}, run = function(ctx, opts)
  local root = ctx.graph:root()
  local made = ctx:map({ 1, 2, 3, 4 }, function(i)
    local key = ctx:path(root) .. "/s" .. i
    local n = ctx:step(key, function()
      local out, err = ctx.agents.implement { key = key }
      if not out then return nil, err end
      return ctx:evaluated("implement", { root }, out, {})
    end)
    return n
  end)
  local pick
  for _, n in ipairs(made) do
    if n.status == "ok" and (not pick or n.metrics.latency_s > pick.metrics.latency_s) then pick = n end
  end
  ctx:log("picked %s", pick and pick.id or "none")
  return pick
end }
]])
  local dir = tmp .. "/slowest-run"
  local code, stdout, stderr = mk { "run", path, TASK, "--model", "scripted", "--seed", "4", "--set", "tests_agent=false",
    "--set", "tune=false", "--run-dir", dir }
  local s = cjson.decode(assert(fs.read(dir .. "/summary.json")))
  local picked = (stdout .. stderr):match("picked (%S+)")
  t.ok(picked and picked ~= "none", "seed 4 samples a correct kernel: " .. stderr)
  t.eq(code, 0, stderr)
  -- the kernel it returned is the one reported: that node, or the latest
  -- node of the same kernel (which holds the kernel's pooled figure)
  local g = require("mk.search.graph").open(dir .. "/graph.git", { readonly = true })
  local a, b = assert(g:get(picked)), assert(g:get(s.best.node))
  t.eq(b:file("kernel.c"), a:file("kernel.c"), "reported " .. s.best.node .. ", returned " .. picked)
end)

local code = t.run()
fs.rm_rf(tmp)
return code
