-- mk.study.sweep: a script over 4 configurations with an injected runner, the
-- results table, resuming a sweep, errors, and the HTML report of it.
local t = dofile("tests/lua/lib/t.lua")
local cjson = require "cjson"
local fs = require "mk.fs"
local task = require "mk.services.task"
local sweep = require "mk.study.sweep"
local fakerun = dofile("tests/lua/lib/fakerun.lua")

local tmp = t.tmpdir("mk-sweep-test-")
local suite = tmp .. "/suite"
for _, n in ipairs({ "a", "b" }) do
  fs.mkdirs(suite .. "/" .. n)
  fs.write(suite .. "/" .. n .. "/task.lua", "return {}\n")
end

local calls, running, max_running = {}, 0, 0
local function runner(o)
  calls[#calls + 1] = o
  running = running + 1
  max_running = math.max(max_running, running)
  task.sleep(0.01)
  running = running - 1
  local w = o.set and o.set.width or 1
  local s = fakerun.make { dir = o.run_dir, nodes = 3 + w, best = 1 + w / 4 + (o.seed or 1) / 100, seed = o.seed or 1,
    task = o.task:match("[^/]+$"), strategy = o.strategy }
  return s
end

local script = tmp .. "/grid.lua"
fs.write(script, [[
local task = arg[1]
local configs = {}
for _, g in ipairs(mk.grid { width = { 2, 3 }, depth = { 1, 2 } }) do
  configs[#configs + 1] = { strategy = "beam", task = task, seed = 7, set = g }
end
local sums = mk.map(configs, mk.run, { concurrency = 2 })
local best = {}
for i, s in ipairs(sums) do best[i] = s.best.speedup end
return best
]])

local out = tmp .. "/sw"

t.test("a sweep over 4 configurations runs each once, 2 at a time, and returns their summaries", function()
  local res = assert(sweep.run_file(script, { out = out, runner = runner, args = { suite .. "/a" },
    defaults = { model = "scripted" } }))
  t.eq(#calls, 4)
  t.eq(max_running, 2)
  for _, c in ipairs(calls) do
    t.eq(c.model, "scripted")
    t.eq(c.seed, 7)
    t.eq(c.task, suite .. "/a")
  end
  t.eq(#res.entries, 4)
  -- grid order: keys sorted (depth, width), so width varies fastest
  t.eq(res.entries[1].label, "beam a depth=1 width=2 seed=7")
  t.eq(res.entries[2].params.set.width, 3)
  t.near(res.returned[2], 1 + 3 / 4 + 0.07, 1e-12)
  t.eq(res.totals.entries, 4)
  t.ok(res.totals.cost.input_tokens > 0)
end)

t.test("the sweep writes one results.json with one entry per call", function()
  local r = cjson.decode(assert(fs.read(out .. "/results.json")))
  t.eq(r.kind, "sweep")
  t.eq(#r.entries, 4)
  t.ok(r.finished)
  for _, e in ipairs(r.entries) do
    t.ok(fs.exists(out .. "/" .. e.run_dir .. "/summary.json"), e.run_dir)
    t.eq(e.how, "ran")
  end
  local txt = sweep.format(r)
  t.contains(txt, "beam a depth=2 width=3 seed=7")
  t.contains(txt, "total: 4 entries")
end)

t.test("running the sweep again reads finished entries instead of rerunning", function()
  calls = {}
  local res = assert(sweep.run_file(script, { out = out, runner = runner, args = { suite .. "/a" } }))
  t.eq(#calls, 0)
  t.eq(res.entries[3].how, "read")
end)

t.test("mk.bench inside a sweep records the aggregate", function()
  local f = tmp .. "/b.lua"
  fs.write(f, "local r = mk.bench { suite = arg[1], strategy = 'beam', ['repeat'] = 2, set = { width = 1 } }\n"
    .. "return r.aggregate.tasks\n")
  calls = {}
  local res = assert(sweep.run_file(f, { out = tmp .. "/sb", runner = runner, args = { suite } }))
  t.eq(#calls, 4)
  t.eq(res.returned, 2)
  t.eq(res.entries[1].kind, "bench")
  t.eq(res.entries[1].aggregate.correct, 2)
  t.eq(#res.entries[1].tasks, 2)
end)

t.test("a failing run is an error entry; a failing script returns script_error with what it did", function()
  local f = tmp .. "/bad.lua"
  fs.write(f, "local s, err = mk.run { strategy = 'beam', task = 'x' }\nassert(s == nil and err.kind == 'run_failed')\n"
    .. "error('boom')\n")
  local res, err = sweep.run_file(f, { out = tmp .. "/sbad", runner = function() error("no such task") end })
  t.eq(res, nil)
  t.eq(err.kind, "script_error")
  t.contains(err.message, "boom")
  t.contains(err.results.entries[1].error, "no such task")
  local _, e2 = sweep.run_file(tmp .. "/missing.lua", { out = tmp .. "/sm" })
  t.eq(e2.kind, "bad_script")
end)

-- What `mkengine sweep` hands run_file: a live status line (redrawn as on a
-- terminal, into a file here) and the script's prints on stdout.
local function cli_progress()
  local path = tmp .. "/progress-" .. tostring(#calls) .. ".txt"
  local f = assert(io.open(path, "w"))
  local p = require("mk.services.progress").new { label = "sweep test", tty = true, stream = f }
  return p, function() f:close(); return fs.read(path) end
end

local function capture_print(fn)
  local lines, old = {}, print
  print = function(...) -- luacheck: ignore 121
    local parts = table.pack(...)
    for i = 1, parts.n do parts[i] = tostring(parts[i]) end
    lines[#lines + 1] = table.concat(parts, "\t", 1, parts.n)
  end
  local ok, a, b = pcall(fn)
  print = old -- luacheck: ignore 121
  if not ok then error(a, 0) end
  return table.concat(lines, "\n"), a, b
end

t.test("with the live progress line on (as mkengine sweep runs it) mk.run returns summaries and the example prints the right medians", function()
  calls = {}
  local prog, progress_text = cli_progress()
  local printed, res = capture_print(function()
    return assert(sweep.run_file("examples/sweeps/beam_grid.lua", { out = tmp .. "/grid-live", runner = runner,
      progress = prog, args = { suite .. "/b" } }))
  end)
  local shown = progress_text()
  t.eq(#calls, 8)
  -- best = 1 + width/4 + seed/100; medians over seeds 1 and 2
  t.contains(printed, "width=2 depth=2      median best 1.52x")
  t.contains(printed, "width=3 depth=3      median best 1.77x")
  t.near(res.returned[4].median_best, 1 + 3 / 4 + 0.015, 1e-12)
  t.contains(shown, "w3 d3 s2")
  t.contains(shown, "best 1.77x")
  local saved = cjson.decode(assert(fs.read(tmp .. "/grid-live/results.json")))
  t.eq(#saved.returned, 4, "results.json holds the script's return value")
  t.eq(saved.returned[1].config, "width=2 depth=2")
end)

t.test("the sweep groups runs by each swept parameter with the median and min-max over seeds", function()
  local r = cjson.decode(assert(fs.read(tmp .. "/grid-live/results.json")))
  local rows = sweep.groups(r)
  -- width and depth vary (strategy and task do not): 2 + 2 rows
  t.eq(#rows, 4)
  t.eq(rows[1].param, "depth"); t.eq(rows[3].param, "width"); t.eq(rows[3].value, "2")
  t.eq(rows[3].n, 4) -- depth 2 and 3, seeds 1 and 2
  t.near(rows[3].median, 1 + 2 / 4 + 0.015, 1e-12)
  t.near(rows[3].min, 1.51, 1e-12); t.near(rows[3].max, 1.52, 1e-12)
  t.near(rows[4].median, 1 + 3 / 4 + 0.015, 1e-12)
  t.near(rows[1].median, (1.51 + 1.52 + 1.76 + 1.77) / 4, 1e-12) -- depth does not change the fake's best
  -- the bootstrap interval of a median over 4 runs lies within their range and holds the median
  t.ok(rows[3].low >= rows[3].min and rows[3].high <= rows[3].max, "interval inside min-max")
  t.ok(rows[3].low <= rows[3].median and rows[3].median <= rows[3].high, "interval holds the median")
  t.eq(rows[3].level, 0.95)
  t.matches(sweep.format(r), "width +3 +median +1%.77x +%[1%.7%d, 1%.77%] +%(min 1%.76x, max 1%.77x, n 4, 4 entries correct%)")
  local report = require "mk.study.report"
  local html = report.html(assert(report.load(tmp .. "/grid-live")))
  t.contains(html, "<h2>By parameter</h2>")
  t.matches(html, '<td class="l">width</td><td class="l">3</td><td>1%.77×</td><td>1%.7%d – 1%.77</td><td>1%.76×</td><td>1%.77×</td><td>4</td>')
end)

t.test("a bench entry contributes every repeat to its parameter's statistics, not one geomean", function()
  -- two tasks x three repeats; repeat k's value is the geomean over the tasks of its runs
  local res = { ["repeat"] = 3, tasks = {
    { task = "a", runs = { { ["repeat"] = 1, correct = true, speedup = 4 }, { ["repeat"] = 2, correct = true, speedup = 2 },
      { ["repeat"] = 3, correct = false } } },
    { task = "b", runs = { { ["repeat"] = 1, correct = true, speedup = 1 }, { ["repeat"] = 2, correct = true, speedup = 8 },
      { ["repeat"] = 3, correct = true, speedup = 9 } } },
  } }
  local vs = sweep.repeat_speedups(res)
  t.eq(#vs, 3)
  t.near(vs[1], 2, 1e-12); t.near(vs[2], 4, 1e-12); t.near(vs[3], 3, 1e-12) -- sqrt(4*1), sqrt(2*8), sqrt(1*9)
  local results = { entries = {
    { kind = "bench", label = "c=1", params = { set = { c = 1 } }, aggregate = { geomean_speedup = 2.9, correct = 2 },
      repeat_speedups = vs },
    { kind = "bench", label = "c=4", params = { set = { c = 4 } }, aggregate = { geomean_speedup = 1.5, correct = 2 },
      repeat_speedups = { 1.2, 1.5, 1.9, 1.4 } },
  } }
  local rows = sweep.groups(results)
  t.eq(#rows, 2)
  t.eq(rows[1].value, "1"); t.eq(rows[1].n, 3); t.near(rows[1].median, 3, 1e-12)
  t.ok(rows[1].low < rows[1].high, "an interval over the repeats, not a point: " .. rows[1].low .. " " .. rows[1].high)
  t.eq(rows[2].n, 4)
end)

t.test("a run that finds no correct kernel is a result with best = nil, not a crash", function()
  local f = tmp .. "/nocorrect.lua"
  fs.write(f, "local s = mk.run { strategy = 'beam', task = arg[1], set = { width = 1 } }\n"
    .. "local again = mk.run { strategy = 'beam', task = arg[1], set = { width = 2 } }\n"
    .. "return { first = s.status, best_is_nil = s.best == nil, again = again.best == nil }\n")
  local function no_kernel(o)
    local s = fakerun.make { dir = o.run_dir, nodes = 4, seed = 3 } -- no best
    s.status, s.best = "no_correct_kernel", cjson.null -- what mk.runner returns and writes
    local on_disk = cjson.decode(assert(fs.read(o.run_dir .. "/summary.json")))
    on_disk.status, on_disk.best = "no_correct_kernel", cjson.null
    fs.write(o.run_dir .. "/summary.json", cjson.encode(on_disk))
    return s
  end
  for _ = 1, 2 do -- second time: read back from summary.json
    local prog, progress_text = cli_progress()
    local res = assert(sweep.run_file(f, { out = tmp .. "/nocorrect", runner = no_kernel, progress = prog,
      args = { suite .. "/a" } }))
    t.eq(res.returned.first, "no_correct_kernel")
    t.eq(res.returned.best_is_nil, true, cjson.encode(res.entries[1]))
    t.eq(res.returned.again, true, cjson.encode(res.returned))
    t.eq(res.entries[1].summary.best, nil)
    t.contains(progress_text(), "no correct kernel")
    t.matches(sweep.format(res), "beam a width=2 +run +1/4 nodes +%- ")
    -- results.json read back as plain cjson (best is JSON null) formats too
    local raw = cjson.decode(assert(fs.read(tmp .. "/nocorrect/results.json")))
    t.matches(sweep.format(raw), "beam a width=1 +run +1/4 nodes +%- ")
  end
end)

t.test("the example in docs/api/sweep.md runs as written and prints the right medians", function()
  local md = assert(fs.read("docs/api/sweep.md"))
  local code = md:match("## Example: examples/sweeps/beam_grid.lua\n.-```lua\n(.-)```")
  t.ok(code, "docs/api/sweep.md has the example")
  local f = tmp .. "/docs_example.lua"
  fs.write(f, code)
  calls = {}
  local printed, res = capture_print(function()
    return assert(sweep.run_file(f, { out = tmp .. "/docs-ex", runner = runner, progress = (cli_progress()),
      args = { suite .. "/a" } }))
  end)
  t.eq(#calls, 8)
  t.contains(printed, "width=2 depth=3      median best 1.52x")
  t.eq(#res.returned, 4)
end)

t.test("the sweep's report has one tree per run entry", function()
  local report = require "mk.study.report"
  local html = report.html(assert(report.load(out)))
  local _, n = html:gsub('<svg class="tree"', "")
  t.eq(n, 4)
  t.contains(html, "width=3")
end)

t.test("the example beam grid runs 8 configurations and returns the median best per (width, depth)", function()
  calls = {}
  local res = assert(sweep.run_file("examples/sweeps/beam_grid.lua", { out = tmp .. "/grid", runner = runner,
    args = { suite .. "/b" } }))
  t.eq(#calls, 8)
  t.eq(#res.returned, 4)
  t.eq(res.returned[1].config, "width=2 depth=2")
  t.near(res.returned[1].median_best, 1 + 2 / 4 + 0.015, 1e-12) -- seeds 1 and 2
end)

local code = t.run()
fs.rm_rf(tmp)
return code
