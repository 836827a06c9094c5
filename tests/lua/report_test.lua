-- mk.study.report: loading run/bench/sweep directories and the HTML page, checked
-- as text here and in headless Chromium (Debian's `chromium`) at the end.
local t = dofile("tests/lua/lib/t.lua")
local fakerun = dofile("tests/lua/lib/fakerun.lua")
local cjson = require "cjson"
local fs = require "mk.fs"
local report = require "mk.study.report"
local metrics = require "mk.study.metrics"

local tmp = t.tmpdir("mk-report-test-")

local function count(s, pat)
  local n = 0
  for _ in s:gmatch(pat) do n = n + 1 end
  return n
end

-- a finished run with 20 nodes and best speedup 2.5
local run_dir = tmp .. "/run"
local run_summary = fakerun.make { dir = run_dir, nodes = 20, best = 2.5, seed = 3 }

-- a bench dir with 3 tasks x 2 repeats, written as mk.study.bench writes it
local bench_dir = tmp .. "/bench"
do
  local tasks = {}
  local rows = {}
  for i, name in ipairs({ "softmax", "rmsnorm", "gemm_relu" }) do
    local runs = {}
    for k = 1, 2 do
      local rel = name .. "/r" .. k
      local best = (i == 3) and nil or (1 + i * 0.3 + k * 0.1)
      local s = fakerun.make { dir = bench_dir .. "/" .. rel, nodes = 6 + i, best = best, seed = i * 10 + k, task = name }
      runs[k] = { ["repeat"] = k, run_dir = rel, correct = s.best ~= nil, compiled = true,
                  speedup = s.best and s.best.speedup, cost = s.cost, nodes = s.nodes }
    end
    local row = metrics.task_row(name, runs)
    row.runs = runs
    rows[i] = row
    tasks[i] = row
  end
  fs.write(bench_dir .. "/results.json", cjson.encode({ kind = "bench", strategy = "beam", suite = "examples/suites/cpu",
    ["repeat"] = 2, tasks = tasks, aggregate = metrics.aggregate(rows) }))
end

t.test("load_run reads nodes from node events, in order, with parents", function()
  local d = assert(report.load_run(run_dir))
  t.eq(d.kind, "run")
  t.eq(#d.nodes, 20)
  t.eq(d.nodes[1].id, "1")
  t.eq(#d.nodes[1].parents, 0)
  t.eq(#d.nodes[2].parents, 1)
  t.eq(d.summary.best.speedup, 2.5)
end)

t.test("best path runs from the root to the summary's best node", function()
  local d = assert(report.load_run(run_dir))
  local path = d.best_path
  t.eq(path[1], "1")
  t.eq(path[#path], run_summary.best.node)
  for i = 2, #path do
    local n
    for _, x in ipairs(d.nodes) do if x.id == path[i] then n = x end end
    t.eq(n.parents[1], path[i - 1], "path step " .. i)
  end
end)

t.test("run series is a non-decreasing best speedup ending at the run's best and its end time", function()
  local d = assert(report.load_run(run_dir))
  local s = d.series
  t.ok(#s >= 2)
  for i = 2, #s do
    t.ok(s[i].best >= s[i - 1].best, "best non-decreasing")
    t.ok(s[i].t >= s[i - 1].t, "time non-decreasing")
    t.ok(s[i].tokens >= s[i - 1].tokens, "tokens non-decreasing")
  end
  t.eq(s[#s].best, 2.5)
  t.near(s[#s].t, run_summary.cost.wall_s, 1e-9)
  t.eq(s[#s].tokens, run_summary.cost.input_tokens + run_summary.cost.output_tokens)
end)

t.test("an unfinished run (no summary.json) still loads and renders", function()
  local dir = tmp .. "/unfinished"
  fakerun.make { dir = dir, nodes = 5, best = 1.5, finished = false }
  local d = assert(report.load(dir))
  t.eq(d.kind, "run")
  t.eq(d.summary, nil)
  t.eq(#d.nodes, 5)
  t.contains(report.html(d), 'data-nodes="5"')
end)

t.test("a torn last line of events.jsonl is skipped", function()
  local dir = tmp .. "/torn"
  fakerun.make { dir = dir, nodes = 4, best = 1.2 }
  fs.append(dir .. "/events.jsonl", '{"t": 99, "type": "node", "node": {"id": "5", "par')
  local d = assert(report.load_run(dir))
  t.eq(#d.nodes, 4)
end)

t.test("load rejects a directory that is no run, bench or sweep", function()
  local dir = tmp .. "/empty"
  fs.mkdirs(dir)
  local d, err = report.load(dir)
  t.eq(d, nil)
  t.eq(err.kind, "bad_input")
  local d2, err2 = report.load(tmp .. "/nope")
  t.eq(d2, nil)
  t.contains(err2.message, "does not exist")
end)

t.test("a chart with nothing to draw says so, also when the spec fixes xmin and ymin", function()
  local html = require "mk.study.html"
  for _, spec in ipairs({ { series = {} }, { series = { { name = "a", points = {} } }, xmin = 0, ymin = 0 },
                          { series = { { name = "a", points = { { 0, 1 } } } }, xlog = true, hlines = { 1 } } }) do
    local svg = html.svg_chart(spec)
    t.contains(svg, "no data")
    t.eq(count(svg, "<path"), 0)
  end
  local svg = html.svg_chart { series = { { name = "a", points = { { 1, 2 }, { 3, 4 } } }, { name = "b", points = { { 2, 3 } } } },
    xmin = 0, ymin = 0, step = true }
  t.eq(count(svg, '<path class="line"'), 2)
  t.eq(count(svg, '<circle class="pt"'), 3)
  t.contains(svg, 'class="legend"')
end)

t.test("layout puts a parent above the middle of its children and leaves in distinct columns", function()
  local nodes = {
    { id = "r", parents = {} }, { id = "a", parents = { "r" } }, { id = "b", parents = { "r" } },
    { id = "c", parents = { "a" } }, { id = "d", parents = { "a" } },
  }
  local lay = report.layout(nodes)
  local p = lay.positions
  t.eq(p.c.x, 0); t.eq(p.d.x, 1); t.eq(p.b.x, 2)
  t.eq(p.a.x, 0.5)
  t.eq(p.r.x, 1.25)
  t.eq(p.c.y, 2); t.eq(p.r.y, 0)
  t.eq(lay.cols, 3)
end)

t.test("run page has one tree element per node, embeds data safely and loads nothing from the network", function()
  local html = report.html(assert(report.load(run_dir)))
  t.eq(count(html, '<g class="node[ "]'), 20)
  t.contains(html, 'data-nodes="20"')
  t.eq(count(html, 'class="node[^"]* best"'), 1)
  -- kernel text with </script> cannot close the JSON block
  local json = html:match('<script type="application/json" id="mk%-data">(.-)</script>')
  t.ok(json, "data block found")
  local data = cjson.decode(json)
  t.contains(data.nodes["3"].files["kernel.c"], "</script><script>window.__xss = 1</script>")
  t.eq(html:find("<script>window.__xss", 1, true), nil, "raw payload must not appear")
  t.eq(html:find("https?://"), nil, "no URL in the page")
  t.eq(html:find('src="', 1, true), nil)
  t.eq(html:find("@import", 1, true), nil)
  t.contains(html, "best correct speedup vs wall time")
  t.contains(html, "best correct speedup vs tokens")
  t.contains(html, "<h2>Fastest correct kernels</h2><table>")
end)

t.test("bench page shows both geomeans, fast_p rows, one row per task and the median runs' trees", function()
  local d = assert(report.load(bench_dir))
  t.eq(d.kind, "bench")
  local html = report.html(d)
  t.contains(html, "geomean speedup (failed = 1.0)")
  t.contains(html, "geomean, floored at 1.0")
  for _, p in ipairs({ "fast_0", "fast_1", "fast_1.5", "fast_2" }) do t.contains(html, "<td>" .. p .. "</td>") end
  t.contains(html, "<td>gemm_relu</td>")
  t.eq(count(html, '<svg class="tree"'), 3)
  -- node keys are unique across trees
  local data = cjson.decode(html:match('<script type="application/json" id="mk%-data">(.-)</script>'))
  t.ok(data.nodes["t1:1"] and data.nodes["t3:1"])
end)

t.test("sweep page lists every entry with its parameters", function()
  local dir = tmp .. "/sweep"
  fs.mkdirs(dir)
  local s = fakerun.make { dir = dir .. "/runs/a", nodes = 4, best = 1.3 }
  fs.write(dir .. "/results.json", cjson.encode({ kind = "sweep", script = "grid.lua", entries = {
    { kind = "run", label = "w2", params = { strategy = "beam", task = "softmax", set = { width = 2 } }, summary = s, run_dir = "runs/a" },
    { kind = "bench", label = "b", params = { strategy = "beam", suite = "cpu" },
      aggregate = metrics.aggregate({ { correct = true, speedup = 2 } }), tasks = { { correct = true, speedup = 2 } } },
  } }))
  local html = report.html(assert(report.load(dir)))
  t.contains(html, "<th>width</th>")           -- one column per `set` key
  t.contains(html, "<td>2</td>")
  t.contains(html, '<td class="l">cpu</td>')    -- the suite by its name
  t.eq(count(html, '<svg class="tree"'), 1)
  t.contains(html, "fast_p curves")
end)

t.test("nodes of one source show one measurement record with its spread; ranks inside the noise are flagged", function()
  local dir = tmp .. "/noise"
  fs.mkdirs(dir)
  local base = 2e-3
  local function node(id, kind, m, parents)
    m.speedup = base / m.latency_s
    return cjson.encode { t = 1, type = "node", node = { id = id, kind = kind, status = "ok", parents = parents or { "n0001" },
      metrics = m } }
  end
  fs.write(dir .. "/events.jsonl", table.concat({
    node("n0001", "reference", { latency_s = base }, {}),
    -- n0002 committed first with one measurement; n0003 (same source) re-measured it
    node("n0002", "implement", { latency_s = 1.0e-3, source_hash = "h1", spread = 0.01 }),
    node("n0003", "implement", { latency_s = 1.1e-3, source_hash = "h1", measurements = 2, samples = { 1.0e-3, 1.2e-3 },
      latency_min_s = 1.0e-3, latency_max_s = 1.2e-3, spread = 0.01 }),
    node("n0004", "implement", { latency_s = 1.15e-3, source_hash = "h2", spread = 0.02 }),
    node("n0005", "implement", { latency_s = 1.6e-3, source_hash = "h3", spread = 0.02 }),
  }, "\n") .. "\n")
  fs.write(dir .. "/run.json", cjson.encode { strategy = "x", task = "t" })
  local data = assert(report.load(dir))
  local by = {}
  for _, n in ipairs(data.nodes) do by[n.id] = n end
  t.eq(by.n0002.metrics.latency_s, 1.1e-3, "the earlier node shows the shared record")
  t.eq(by.n0002.metrics.measurements, 2)
  local html = report.html(data)
  t.contains(html, "2× 1–1.2 ms")
  t.contains(html, "±1 %")
  -- n0004 (1.15 ms ± 1 %) overlaps the record's 1.0–1.2 ms: inside the noise; n0005 does not
  -- one row for the source of n0002 and n0003
  t.contains(html, '<tr><td>1</td><td class="l">n0002 (same source: n0003)</td>')
  t.contains(html, '<tr><td>2 <span class="noise"')
  t.contains(html, "≈ #1</span></td><td class=\"l\">n0004")
  t.ok(not html:find('<tr><td>3 <span class="noise"', 1, true), "1.6 ms is outside the 1.15 ms node's range")
  t.contains(html, "1 ranking inside the noise")
end)

t.test("a NaN or infinite metric is embedded as null instead of breaking the page", function()
  local d = assert(report.load_run(run_dir))
  d.nodes[1].metrics.spread = 0 / 0
  d.nodes[2].metrics.gflops = math.huge
  local html = report.html(d)
  local data = cjson.decode(html:match('<script type="application/json" id="mk%-data">(.-)</script>'))
  t.eq(data.nodes["1"].metrics.spread, cjson.null)
end)

t.test("report.write writes the page atomically and errors on bad input", function()
  local out = tmp .. "/out.html"
  t.ok(report.write(run_dir, out))
  t.contains(fs.read(out), "<!DOCTYPE html>")
  local ok, err = report.write(tmp .. "/missing", out)
  t.eq(ok, nil)
  t.eq(err.kind, "bad_input")
end)

t.test("a real run directory (mk.search.rundir + mk.search.graph) is read through the graph, also while it is open", function()
  local ok, rundir = pcall(require, "mk.search.rundir")
  if not ok then t.skip("mk.search.rundir is not on this branch") end
  local run = assert(rundir.create { dir = tmp .. "/real", strategy = "beam", task = "softmax", seed = 4,
    model = "scripted", sync = false })
  local g = run.graph
  local r = g:add { kind = "root", files = { ["kernel.c"] = "ref\n" }, metrics = { latency_s = 1e-3, speedup = 1 } }
  run:event { type = "llm_call", input_tokens = 500, output_tokens = 50, cost_usd = 0.002 }
  local a = g:add { kind = "implement", parents = { r }, files = { ["kernel.c"] = "a\n" }, plan = "tile rows",
    metrics = { latency_s = 5e-4, speedup = 2 }, cost = { input_tokens = 500, output_tokens = 50 } }
  g:add { kind = "implement", parents = { r }, files = { ["kernel.c"] = "b(\n" }, status = "compile_error",
    error = "kernel.c:1: error: expected ')'" }
  run:event { type = "llm_call", input_tokens = 700, output_tokens = 70, cost_usd = 0.003 }
  local c = g:add { kind = "tune", parents = { a }, files = { ["kernel.c"] = "a2\n" }, metrics = { latency_s = 4e-4, speedup = 2.5 } }
  -- while the run is still open (locked by its writer)
  local live = assert(report.load_run(run.dir))
  t.eq(#live.nodes, 4)
  t.eq(live.nodes[3].status, "compile_error")
  t.contains(live.nodes[3].error, "expected ')'")
  t.eq(live.nodes[2].plan, "tile rows")
  t.eq(live.nodes[2].files["kernel.c"], "a\n")
  t.same(live.best_path, { r.id, a.id, c.id })
  local last = live.series[#live.series]
  t.eq(last.best, 2.5)
  t.eq(last.tokens, 1320)
  run:set_status("done")
  run:write_summary {}
  run:close()
  local html = report.html(assert(report.load(tmp .. "/real")))
  t.contains(html, 'data-nodes="4"')
  t.contains(html, 'data-key="' .. c.id .. '"')
end)

-- Headless Chromium -----------------------------------------------------------

local chromium = dofile("tests/lua/lib/chromium.lua")
local function probe(html, name) return chromium.probe(t, html, tmp, name) end

t.test("chromium: run page loads with no console error, one element per node, click shows the node", function()
  local html = report.html(assert(report.load(run_dir)))
  local r = probe(html, "run")
  t.same(r.errors, {})
  t.eq(r.nodes, 20)
  t.eq(r.counts[1][1], r.counts[1][2])
  t.eq(r.head, "node " .. r.clicked)
  t.contains(r.code, "// node " .. r.clicked)
  t.eq(r.xss, false)
end)

t.test("chromium: bench page loads with no console error and each tree has one element per node", function()
  local r = probe(report.html(assert(report.load(bench_dir))), "bench")
  t.same(r.errors, {})
  t.eq(#r.counts, 3)
  for _, c in ipairs(r.counts) do t.eq(c[1], c[2]) end
  t.ok(r.head and r.head:match("^node "), "panel shows a node")
end)

local code = t.run()
fs.rm_rf(tmp)
return code
