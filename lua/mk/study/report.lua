--- mk.study.report: turns a run directory, a bench directory or a sweep's results
--- into ONE self-contained HTML page (inline CSS, SVG and a little JS; no
--- network, no CDN): the search tree with a node panel, best speedup against
--- wall time and tokens, cost breakdown, and for suites the per-task table
--- with its fast_p curve. Loading (report.load*) and rendering
--- (report.html) are separate so a sweep script can render its own data.
local fs = require("mk.fs")
local html = require("mk.study.html")
local metrics = require("mk.study.metrics")
local sweep = require("mk.study.sweep")
local util = require("mk.services.util")
local figure = require("mk.search.figure")
local rundir = require("mk.search.rundir")

local report = {}

-- JSON ----------------------------------------------------------------------

local read_json = util.read_json
report.read_json = read_json

--- Read a JSON-lines file; a torn last line (a killed writer) is skipped.
local read_jsonl = util.read_jsonl
report.read_jsonl = read_jsonl

-- Formatting -------------------------------------------------------------

local esc = html.escape
local page = html.page
report.escape = html.escape
report.svg_chart = html.svg_chart
report.page = html.page

local function num(x) return type(x) == "number" and x == x and x or nil end

local function fmt(x, digits)
  x = num(x)
  if not x then return "–" end
  if math.type(x) == "integer" then return tostring(x) end
  return string.format("%." .. (digits or 2) .. "f", x)
end

-- Counts come back from JSON as floats (8.0): print them as integers.
local function fmt_count(x)
  x = num(x)
  if not x then return "–" end
  if x == math.floor(x) and math.abs(x) < 2 ^ 53 then return string.format("%d", x) end
  return string.format("%.2f", x)
end

local function fmt_int(x)
  x = num(x)
  if not x then return "–" end
  local s = string.format("%d", math.floor(x + 0.5))
  local out = s:reverse():gsub("(%d%d%d)", "%1,"):reverse()
  return (out:gsub("^,", ""):gsub("^%-,", "-"))
end

local function fmt_x(x) x = num(x); return x and string.format("%.2f×", x) or "–" end
local function fmt_usd(x) x = num(x); return x and string.format("$%.4f", x) or "–" end

local fmt_s = util.fmt_s

-- Run directories ----------------------------------------------------------

local CORRECT = { ok = true, correct = true, fast = true, slow = true }

--- Whether a node (normalised) holds a correct kernel.
function report.node_correct(n)
  if n.metrics and n.metrics.correct ~= nil then return n.metrics.correct == true end
  return CORRECT[n.status or ""] == true
end

local function node_speedup(n)
  local s = n.metrics and num(n.metrics.speedup)
  if s and s > 0 and report.node_correct(n) then return s end
  return nil
end

local NODE_EVENTS = { node = true, node_added = true, ["node.add"] = true, ["node.added"] = true, add_node = true }

local function is_node_event(ev)
  return NODE_EVENTS[ev.type or ""] and (ev.node ~= nil or ev.id ~= nil)
end

-- Bring a node from any source (graph object, event, index line) to
-- {id, parents, kind, status, metrics, cost, plan, files, error, t}.
local function normalise_node(src, t)
  local n = type(src.node) == "table" and src.node or src
  local parents = {}
  for _, p in ipairs(n.parents or {}) do
    parents[#parents + 1] = type(p) == "table" and tostring(p.id) or tostring(p)
  end
  local files = {}
  if type(n.files) == "table" then
    for k, v in pairs(n.files) do
      if type(k) == "string" and type(v) == "string" then files[k] = v end
    end
  end
  local metrics_t = type(n.metrics) == "table" and n.metrics or {}
  -- rundir's node events carry speedup/latency_s flat, without `metrics`
  if type(n.metrics) ~= "table" then
    metrics_t = { speedup = num(n.speedup), latency_s = num(n.latency_s), correct = n.correct }
  end
  local meta = type(n.meta) == "table" and n.meta or {}
  return {
    id = tostring(n.id),
    parents = parents,
    kind = n.kind,
    status = n.status,
    metrics = metrics_t,
    cost = type(n.cost) == "table" and n.cost or {},
    plan = type(n.plan) == "string" and n.plan or nil,
    files = files,
    error = n.error or n.message or metrics_t.message or meta.error,
    t = num(n.t) or num(src.t) or num(t) or num(meta.t),
  }
end

-- Nodes through mk.search.graph when the run's graph can be opened; nil otherwise.
local function nodes_from_graph(dir)
  local ok2, run = pcall(rundir.open, dir, { readonly = true })
  if not ok2 or not run or not run.graph then return nil end
  local out = {}
  local ok3 = pcall(function()
    local list = run.graph:nodes()
    for _, gn in ipairs(list) do
      local files = {}
      if type(gn.files) == "function" and type(gn.file) == "function" then
        for _, name in ipairs(gn:files()) do files[name] = gn:file(name) end
      elseif type(gn.files) == "table" then
        files = gn.files
      end
      local n = normalise_node({
        id = gn.id, parents = gn.parents, kind = gn.kind, status = gn.status,
        metrics = gn.metrics, cost = gn.cost, plan = gn.plan, meta = gn.meta,
        files = files, error = gn.error,
      })
      if next(n.files) == nil and type(gn.file) == "function" then
        for _, name in ipairs({ "kernel.c", "kernel.py", "kernel.cu" }) do
          local okf, src = pcall(gn.file, gn, name)
          if okf and type(src) == "string" then n.files[name] = src end
        end
      end
      out[#out + 1] = n
    end
  end)
  if run.close then pcall(run.close, run) end
  return ok3 and #out > 0 and out or nil
end

local function event_tokens(ev)
  local u = type(ev.usage) == "table" and ev.usage or ev
  return (num(u.input_tokens) or 0) + (num(u.output_tokens) or 0),
    num(u.usd) or num(u.cost_usd) or num(ev.usd) or num(ev.cost_usd) or 0
end

local LLM_EVENTS = { llm = true, llm_call = true, ["llm.call"] = true }

--- Load one run directory: run.json, summary.json, events.jsonl and the
--- nodes (through mk.search.graph, else from node events or nodes.jsonl).
---@param dir string
---@return table|nil data, table|nil err
function report.load_run(dir)
  if type(dir) ~= "string" then error("report.load_run: dir must be a string", 2) end
  if not fs.isdir(dir) then return nil, { kind = "not_a_run", message = dir .. " is not a directory" } end
  local run, rerr = read_json(dir .. "/run.json")
  local summary, serr = read_json(dir .. "/summary.json")
  -- a file that is there but unreadable is an error, not an empty report
  if rerr or serr then return nil, rerr or serr end
  if not run and not summary and not fs.exists(dir .. "/events.jsonl") then
    return nil, { kind = "not_a_run", message = dir .. " has no run.json, summary.json or events.jsonl" }
  end
  local events = read_jsonl(dir .. "/events.jsonl")
  local nodes = nodes_from_graph(dir)
  local times = {}
  for _, ev in ipairs(events) do
    if is_node_event(ev) then
      local n = type(ev.node) == "table" and ev.node or ev
      if n.id ~= nil and times[tostring(n.id)] == nil then times[tostring(n.id)] = num(ev.t) end
    end
  end
  if not nodes then
    nodes = {}
    local seen = {}
    local src = events
    if fs.exists(dir .. "/nodes.jsonl") then src = read_jsonl(dir .. "/nodes.jsonl") end
    for _, ev in ipairs(src) do
      if src ~= events or is_node_event(ev) then
        local n = normalise_node(ev, ev.t)
        if seen[n.id] then
          -- a later record of the same node (e.g. evaluated) updates it
          local old = nodes[seen[n.id]]
          for k, v in pairs(n) do
            if v ~= nil and not (type(v) == "table" and next(v) == nil) and k ~= "t" then old[k] = v end
          end
        else
          nodes[#nodes + 1] = n
          seen[n.id] = #nodes
        end
      end
    end
  end
  for _, n in ipairs(nodes) do n.t = n.t or times[n.id] end
  report.unify_records(nodes, events)
  local data = {
    kind = "run", dir = dir, run = run or {}, summary = summary, events = events, nodes = nodes,
  }
  data.series = report.run_series(data)
  data.best_path = report.best_path(data)
  return data
end

--- Best-so-far speedup as a step series over wall time and cumulative
--- tokens: {{t=, tokens=, usd=, best=, node=}...} with one point per
--- improvement, plus the run's end.
function report.run_series(data)
  local llm_seen = false
  for _, ev in ipairs(data.events) do
    if LLM_EVENTS[ev.type or ""] then llm_seen = true break end
  end
  -- merge node times with llm events on one timeline
  local timeline = {}
  for i, ev in ipairs(data.events) do
    if LLM_EVENTS[ev.type or ""] then timeline[#timeline + 1] = { t = num(ev.t) or 0, i = i, llm = ev } end
  end
  for i, n in ipairs(data.nodes) do
    timeline[#timeline + 1] = { t = n.t or 0, i = #data.events + i, node = n }
  end
  table.sort(timeline, function(a, b)
    if a.t ~= b.t then return a.t < b.t end
    return a.i < b.i
  end)
  local tokens, usd, best = 0, 0, nil
  local pts = {}
  for _, e in ipairs(timeline) do
    if e.llm then
      local tk, u = event_tokens(e.llm)
      tokens, usd = tokens + tk, usd + u
    else
      if not llm_seen then
        tokens = tokens + (num(e.node.cost.input_tokens) or 0) + (num(e.node.cost.output_tokens) or 0)
        usd = usd + (num(e.node.cost.usd) or 0)
      end
      local s = node_speedup(e.node)
      if s and (not best or s > best) then
        best = s
        pts[#pts + 1] = { t = e.t, tokens = tokens, usd = usd, best = best, node = e.node.id }
      end
    end
  end
  local cost = data.summary and data.summary.cost or {}
  local t_end = num(cost.wall_s) or (timeline[#timeline] and timeline[#timeline].t) or 0
  local tk_end = (num(cost.input_tokens) and ((cost.input_tokens or 0) + (cost.output_tokens or 0))) or tokens
  if best then
    pts[#pts + 1] = { t = math.max(t_end, pts[#pts].t), tokens = math.max(tk_end, pts[#pts].tokens), usd = usd, best = best, final = true }
  end
  return pts
end

local function find_node(nodes, id)
  for _, n in ipairs(nodes) do if n.id == id then return n end end
end

--- The best node (summary.best.node, else the fastest correct node) and
--- the ids on the path from the root to it (following first parents).
function report.best_path(data)
  local best
  local sb = data.summary and data.summary.best
  if type(sb) == "table" and sb.node ~= nil then best = find_node(data.nodes, tostring(sb.node)) end
  if not best then
    local bs
    for _, n in ipairs(data.nodes) do
      local s = node_speedup(n)
      if s and (not bs or s > bs) then best, bs = n, s end
    end
  end
  local path = {}
  local seen = {}
  local n = best
  while n and not seen[n.id] do
    seen[n.id] = true
    table.insert(path, 1, n.id)
    n = n.parents[1] and find_node(data.nodes, n.parents[1])
  end
  return path
end

-- Bench and sweep ------------------------------------------------------------

-- The run of each item that names one (run_dir(item) -> a directory or
-- nil), a relative one taken from `base`: runs[i] for items[i].
local function load_runs(items, base, run_dir)
  local runs = {}
  for i, x in ipairs(items or {}) do
    local rd = run_dir(x)
    if rd then runs[i] = report.load_run(rd:sub(1, 1) == "/" and rd or (base .. "/" .. rd)) end
  end
  return runs
end

--- Load a bench directory (its results.json) and each task's median run.
function report.load_bench(dir)
  local res, err = read_json(dir .. "/results.json")
  if not res then return nil, err or { kind = "not_a_bench", message = dir .. " has no results.json" } end
  return { kind = "bench", dir = dir, results = res, runs = load_runs(res.tasks, dir, function(row)
    local m = row.runs and row.median_repeat and row.runs[row.median_repeat]
    return m and m.run_dir
  end) }
end

--- Load a sweep's results (a results.json with kind = "sweep", or the
--- directory holding it).
function report.load_sweep(path)
  local file = fs.isdir(path) and (path .. "/results.json") or path
  local res, err = read_json(file)
  if not res then return nil, err or { kind = "not_a_sweep", message = file .. " cannot be read" } end
  local base = file:match("^(.*)/[^/]*$") or "."
  return { kind = "sweep", dir = base, results = res, runs = load_runs(res.entries, base, function(e)
    return e.kind == "run" and e.run_dir
  end) }
end

--- Load whatever PATH is: a run dir, a bench dir, a sweep dir or a sweep's
--- results file. Returns data | nil, {kind = "bad_input", message}.
---@param path string
function report.load(path)
  if type(path) ~= "string" then error("report.load: path must be a string", 2) end
  if not fs.exists(path) then return nil, { kind = "bad_input", message = path .. " does not exist" } end
  local file = fs.isdir(path) and (path .. "/results.json") or path
  if fs.exists(file) and not fs.isdir(file) then
    local res, err = read_json(file)
    if not res then return nil, err or { kind = "bad_input", message = file .. " is not JSON" } end
    if res.kind == "sweep" then return report.load_sweep(path) end
    if res.kind == "bench" or res.tasks then return report.load_bench(fs.isdir(path) and path or (file:match("^(.*)/") or ".")) end
  end
  if fs.isdir(path) then
    local data, err = report.load_run(path)
    if data then return data end
    return nil, { kind = "bad_input", message = path .. " is not a run, bench or sweep directory (" .. err.message .. ")" }
  end
  return nil, { kind = "bad_input", message = path .. " is not a results.json of a bench or sweep" }
end

--- Lay out a node DAG as a tree along first parents: leaves get
--- consecutive columns, a parent sits over the middle of its children.
--- Returns {positions = {id -> {x, y}}, cols, depth}.
function report.layout(nodes)
  local byid, kids, roots = {}, {}, {}
  for _, n in ipairs(nodes) do byid[n.id] = n end
  for _, n in ipairs(nodes) do
    local p = n.parents[1]
    if p and byid[p] and p ~= n.id then
      kids[p] = kids[p] or {}
      table.insert(kids[p], n)
    else
      roots[#roots + 1] = n
    end
  end
  local pos, col, maxd = {}, 0, 0
  local function place(n, d)
    if pos[n.id] then return pos[n.id].x end
    pos[n.id] = { x = 0, y = d }
    if d > maxd then maxd = d end
    local ks = kids[n.id]
    local x
    if not ks then
      x = col
      col = col + 1
    else
      local first, last
      for _, k in ipairs(ks) do
        local kx = place(k, d + 1)
        first = first or kx
        last = kx
      end
      x = (first + last) / 2
    end
    pos[n.id].x = x
    return x
  end
  for _, r in ipairs(roots) do place(r, 0) end
  -- nodes on a parent cycle (corrupt data) still get drawn
  for _, n in ipairs(nodes) do if not pos[n.id] then place(n, 0) end end
  return { positions = pos, cols = math.max(col, 1), depth = maxd }
end

local STATUS_CLASS = {
  ok = "ok", correct = "ok", incorrect = "incorrect", compile_error = "compile",
  timeout = "timeout", crash = "crash", rejected = "rejected",
}

--- The search tree as inline SVG: one <g class="node"> per node with
--- data-key = prefix .. id; edges along parents; the best path marked.
function report.svg_tree(nodes, best_path, prefix)
  prefix = prefix or ""
  local lay = report.layout(nodes)
  local DX, DY, PAD = 46, 64, 28
  local W = math.floor(lay.cols * DX + 2 * PAD)
  local H = math.floor((lay.depth + 1) * DY + 2 * PAD - DY / 2)
  local onpath, pathedge = {}, {}
  for i, id in ipairs(best_path or {}) do
    onpath[id] = true
    if i > 1 then pathedge[best_path[i - 1] .. "\0" .. id] = true end
  end
  local best = best_path and best_path[#best_path]
  local function P(id)
    local p = lay.positions[id]
    return PAD + p.x * DX + DX / 2, PAD + p.y * DY
  end
  local out = { string.format('<svg class="tree" data-nodes="%d" viewBox="0 0 %d %d" width="%d" height="%d">', #nodes, W, H, W, H) }
  out[#out + 1] = "<g class=\"edges\">"
  for _, n in ipairs(nodes) do
    local x2, y2 = P(n.id)
    for i, p in ipairs(n.parents) do
      if lay.positions[p] then
        local x1, y1 = P(p)
        local cls = "edge" .. (i > 1 and " extra" or "") .. (pathedge[p .. "\0" .. n.id] and " bestpath" or "")
        local ym = (y1 + y2) / 2
        out[#out + 1] = string.format('<path class="%s" d="M%.1f,%.1fC%.1f,%.1f %.1f,%.1f %.1f,%.1f"/>',
          cls, x1, y1, x1, ym, x2, ym, x2, y2)
      end
    end
  end
  out[#out + 1] = "</g><g class=\"nodes\">"
  for _, n in ipairs(nodes) do
    local x, y = P(n.id)
    local st = STATUS_CLASS[n.status or ""] or "other"
    local s = node_speedup(n)
    if st == "ok" and s and s > 1 then st = "fast" end
    local cls = "node st-" .. st .. (onpath[n.id] and " onpath" or "") .. (n.id == best and " best" or "")
    local label = s and string.format("%.2f", s) or (n.kind and n.kind:sub(1, 4) or "")
    local tip = string.format("%s · %s · %s%s", n.id, n.kind or "?", n.status or "?", s and string.format(" · %.3f×", s) or "")
    out[#out + 1] = string.format(
      '<g class="%s" data-key="%s" tabindex="0" transform="translate(%.1f,%.1f)"><title>%s</title>'
        .. '<circle r="%d"/><text y="%d" text-anchor="middle">%s</text></g>',
      cls, esc(prefix .. n.id), x, y, esc(tip), n.id == best and 10 or 8, 22, esc(label))
  end
  out[#out + 1] = "</g></svg>"
  return table.concat(out)
end

local function card(value, label)
  return string.format('<div class="card"><b>%s</b><span>%s</span></div>', esc(value), esc(label))
end

local function node_json(n)
  return { id = n.id, kind = n.kind, status = n.status, parents = n.parents, metrics = n.metrics, cost = n.cost,
           plan = n.plan, files = n.files, error = n.error and tostring(n.error) or nil, t = n.t }
end

local STATUS_KEYS = '<div class="keys">status:<i style="background:#1a7f37"></i>correct, faster<i style="background:#6fdd8b"></i>correct'
  .. '<i style="background:#fb8f44"></i>incorrect<i style="background:#cf222e"></i>compile error<i style="background:#8250df"></i>timeout'
  .. '<i style="background:#6e0f0f"></i>crash<i style="background:#8c959f"></i>rejected<i style="background:#d0d7de"></i>other'
  .. ' · gold: best path, black ring: best node · click a node</div>'

-- Tree section of one run; registers its nodes in `store` under prefix.
local function tree_section(run, store, prefix)
  for _, n in ipairs(run.nodes) do store[prefix .. n.id] = node_json(n) end
  if #run.nodes == 0 then return '<p class="sub">no nodes recorded</p>' end
  return '<div class="tree-wrap"><div class="tree-scroll">' .. report.svg_tree(run.nodes, run.best_path, prefix)
    .. '</div><div class="panel"><p class="sub">click a node to see its plan, code and metrics</p></div></div>'
end

local function cost_rows(cost)
  cost = cost or {}
  local tin, tout = num(cost.input_tokens) or 0, num(cost.output_tokens) or 0
  local tt = math.max(tin + tout, 1)
  local secs = { llm_s = num(cost.llm_s) or 0, device_s = num(cost.device_s) or 0, wall_s = num(cost.wall_s) or 0 }
  local smax = math.max(secs.llm_s, secs.device_s, secs.wall_s, 1e-9)
  local function bar(v, m) return string.format('<span class="bar" style="width:%dpx"></span>', math.floor(160 * v / m + 0.5)) end
  return table.concat({
    "<table><tr><th>item</th><th>amount</th><th></th></tr>",
    "<tr><td>input tokens</td><td>", fmt_int(tin), "</td><td>", bar(tin, tt), "</td></tr>",
    "<tr><td>output tokens</td><td>", fmt_int(tout), "</td><td>", bar(tout, tt), "</td></tr>",
    "<tr><td>USD</td><td>", fmt_usd(cost.usd), "</td><td></td></tr>",
    "<tr><td>LLM time</td><td>", fmt_s(secs.llm_s), "</td><td>", bar(secs.llm_s, smax), "</td></tr>",
    "<tr><td>device time</td><td>", fmt_s(secs.device_s), "</td><td>", bar(secs.device_s, smax), "</td></tr>",
    "<tr><td>wall time</td><td>", fmt_s(secs.wall_s), "</td><td>", bar(secs.wall_s, smax), "</td></tr>",
    "</table>",
  })
end

local function progress_charts(series_list)
  local st, sk = {}, {}
  for _, s in ipairs(series_list) do
    local a, b = {}, {}
    for _, p in ipairs(s.points) do
      a[#a + 1] = { p.t, p.best, hide = p.final, label = string.format("%.1f s: %.3f×", p.t, p.best) }
      b[#b + 1] = { p.tokens, p.best, hide = p.final, label = string.format("%s tokens: %.3f×", fmt_int(p.tokens), p.best) }
    end
    if #a > 0 then
      st[#st + 1] = { name = s.name, points = a }
      sk[#sk + 1] = { name = s.name, points = b }
    end
  end
  return '<div class="charts"><figure>' .. report.svg_chart { series = st, step = true, xmin = 0, hlines = { 1 },
      xlabel = "wall time (s)", ylabel = "best speedup (×)" }
    .. '<figcaption>best correct speedup vs wall time</figcaption></figure><figure>'
    .. report.svg_chart { series = sk, step = true, xmin = 0, hlines = { 1 },
      xlabel = "tokens (input + output)", ylabel = "best speedup (×)" }
    .. '<figcaption>best correct speedup vs tokens</figcaption></figure></div>'
end

local function yn(b) return b and '<td class="yes">yes</td>' or '<td class="no">no</td>' end

-- The exact fast_p step function, with a marker (and tooltip) at each
-- speedup where it drops.
local function fast_curve_chart(rows, name, xmax)
  local pts = {}
  local steps = metrics.fast_steps(rows, xmax)
  for i, p in ipairs(steps) do
    pts[#pts + 1] = { p.p, p.value, hide = i == #steps,
      label = string.format("fast_p = %.2f for p ≥ %.2f", p.value, p.p) }
  end
  return { name = name or "fast_p", points = pts }
end


--- Nodes with the same source share one measurement record: every node of
--- it shows its kernel's figure (mk.search.figure: the median of all its
--- measurements, `measure` events of the run included), and an older one
--- names the node holding it (`same_as`), since its commit holds the record
--- as it stood then.
---@param nodes table[] normalised nodes, in add order
---@param events table[]|nil the run's events
function report.unify_records(nodes, events)
  local pool = figure.pool()
  for _, n in ipairs(nodes) do pool:add(n) end
  for _, e in ipairs(events or {}) do
    if e.type == "measure" then pool:measure(e) end
  end
  for _, n in ipairs(nodes) do
    local f, holder = pool:of(n)
    if f and n.metrics.source_hash then
      for _, k in ipairs({ "latency_s", "speedup", "measurements", "samples", "latency_min_s", "latency_max_s",
        "contended" }) do
        n.metrics[k] = f[k]
      end
      n.same_as = holder
    end
  end
  return nodes
end

--- The latency range a node's measurement supports (mk.search.figure.range):
--- over its measurements when it was measured more than once, else the
--- middle 80 % of its one benchmark's timed calls.
function report.latency_range(n)
  return figure.range(n.metrics or {})
end

-- "3× 1.20–1.31 ms" or "±4 %": the measurement spread of a node.
local function spread_text(n)
  local m = n.metrics or {}
  if (num(m.measurements) or 1) > 1 and num(m.latency_min_s) then
    return string.format("%d× %.4g–%.4g ms", m.measurements, m.latency_min_s * 1e3, m.latency_max_s * 1e3)
  end
  return num(m.spread) and string.format("±%.0f %%", 50 * m.spread) or "–"
end

-- The n fastest correct nodes with the first line of their plan.
local function top_nodes_table(nodes, n)
  local list = {}
  for _, x in ipairs(nodes) do
    if node_speedup(x) and x.kind ~= "reference" and x.kind ~= "root" then list[#list + 1] = x end
  end
  table.sort(list, function(a, b)
    if node_speedup(a) ~= node_speedup(b) then return node_speedup(a) > node_speedup(b) end
    return a.id < b.id
  end)
  -- one row per source: identical kernels share one measurement record
  local rows, first = {}, {}
  for _, x in ipairs(list) do
    local h = x.metrics.source_hash
    if h and first[h] then
      first[h].same[#first[h].same + 1] = x.id
    else
      local row = { node = x, same = {} }
      rows[#rows + 1] = row
      if h then first[h] = row end
    end
  end
  if #list == 0 then return '<p class="sub">no correct kernel besides the reference</p>' end
  local out = { '<table><tr><th>#</th><th class="l">node</th><th class="l">kind</th><th>speedup</th><th>latency</th>'
    .. '<th>measured</th><th>found at</th><th class="l">plan</th></tr>' }
  local noisy = 0
  for i = 1, math.min(n, #rows) do
    local x = rows[i].node
    local plan = x.plan and (x.plan:match("[^\n]*%S[^\n]*") or "") or ""
    if #plan > 110 then plan = plan:sub(1, 107) .. "..." end
    -- a rank inside the noise: this node's range overlaps the one ranked above it
    local flag = ""
    if i > 1 then
      local lo = report.latency_range(x)
      local _, hi_prev = report.latency_range(rows[i - 1].node)
      if lo and hi_prev and lo <= hi_prev then
        flag = ' <span class="noise" title="its latency range overlaps the node ranked above">≈ #' .. (i - 1) .. "</span>"
        noisy = noisy + 1
      end
    end
    out[#out + 1] = string.format('<tr><td>%d%s</td><td class="l">%s</td><td class="l">%s</td><td>%s</td><td>%s</td><td>%s</td>'
      .. '<td>%s</td><td class="l">%s</td></tr>', i, flag,
      esc(x.id) .. (#rows[i].same > 0 and (" (same source: " .. esc(table.concat(rows[i].same, ", ")) .. ")") or ""),
      esc(x.kind or "–"), fmt_x(node_speedup(x)),
      num(x.metrics.latency_s) and string.format("%.4g ms", x.metrics.latency_s * 1e3) or "–", esc(spread_text(x)),
      x.t and fmt_s(x.t) or "–", esc(plan))
  end
  out[#out + 1] = "</table>"
  if noisy > 0 then
    out[#out + 1] = string.format('<p class="sub">≈ #k: %d ranking%s inside the noise — the latency range (min–max over '
      .. "repeated measurements, else the middle 80 %% of one benchmark's calls) overlaps the node ranked above</p>",
      noisy, noisy == 1 and "" or "s")
  end
  return table.concat(out)
end

local function run_body(run, store, prefix)
  local s = run.summary or {}
  local cost = s.cost or {}
  local best = s.best or {}
  local ncorrect = 0
  for _, n in ipairs(run.nodes) do if report.node_correct(n) then ncorrect = ncorrect + 1 end end
  local bestsp = num(best.speedup) or (run.series[#run.series] and run.series[#run.series].best)
  local parts = {
    '<div class="cards">',
    card(fmt_x(bestsp), "best speedup"),
    card(best.latency_s and string.format("%.4g ms", best.latency_s * 1e3) or "–", "best latency"),
    card(fmt_count(s.nodes or #run.nodes), "nodes"),
    card(fmt_count(s.correct_nodes or ncorrect), "correct nodes"),
    card(fmt_int((num(cost.input_tokens) or 0) + (num(cost.output_tokens) or 0)), "tokens"),
    card(fmt_usd(cost.usd), "USD"),
    card(fmt_s(cost.wall_s), "wall time"),
    "</div>",
    "<h2>Search tree</h2>", STATUS_KEYS, tree_section(run, store, prefix or ""),
    "<h2>Fastest correct kernels</h2>", top_nodes_table(run.nodes, 10),
    "<h2>Progress</h2>", progress_charts({ { name = s.task or run.run.task or "run", points = run.series } }),
    "<h2>Cost</h2>", cost_rows(cost),
  }
  return table.concat(parts)
end

local function run_sub(run)
  local r, s = run.run or {}, run.summary or {}
  local bits = {}
  local function add(k, v) if v ~= nil and v ~= "" then bits[#bits + 1] = esc(k) .. " <b>" .. esc(tostring(v)) .. "</b>" end end
  add("strategy", s.strategy or r.strategy)
  add("task", s.task or r.task)
  add("model", s.model_label or s.model or r.model) -- the label says when it is the scripted test double
  add("simulation", s.simulation) -- a simulated model or device (docs/simulator.md)
  local seed = s.seed or r.seed
  add("seed", math.tointeger(seed) or seed)
  add("status", s.status or r.status or (run.summary and "" or "running / unfinished"))
  local started = r.started_at or r.start or r.started
  if type(started) == "number" then started = os.date("!%Y-%m-%d %H:%M UTC", math.floor(started)) end
  add("started", started)
  local opts = s.options or r.options
  if type(opts) == "table" then
    local o = {}
    for k, v in pairs(opts) do
      if type(v) ~= "table" then o[#o + 1] = k .. "=" .. tostring(math.tointeger(v) or v) end
    end
    table.sort(o)
    if #o > 0 then add("options", table.concat(o, " ")) end
  end
  return table.concat(bits, " · ")
end

local function bench_body(b, store)
  local res = b.results
  local agg = res.aggregate or metrics.aggregate(res.tasks or {})
  local rows = res.tasks or {}
  local cost = agg.cost or {}
  local parts = {
    '<div class="cards">',
    '<div class="card pair"><div><b>', fmt_x(agg.geomean_speedup), '</b><span>geomean speedup (failed = 1.0)</span></div>',
    '<div><b>', fmt_x(agg.geomean_speedup_floored), '</b><span>geomean, floored at 1.0</span></div></div>',
    card(string.format("%s / %s", fmt_count(agg.correct), fmt_count(agg.tasks or #rows)), "correct tasks"),
    card(string.format("%s / %s", fmt_count(agg.compiled), fmt_count(agg.tasks or #rows)), "compiled tasks"),
    card(fmt_int((num(cost.input_tokens) or 0) + (num(cost.output_tokens) or 0)), "tokens"),
    card(fmt_usd(cost.usd), "USD"),
    card(fmt_s(cost.wall_s), "wall time (sum of runs)"),
    "</div>",
    "<h2>fast_p</h2><div class=\"charts\"><table><tr><th>p</th><th>fast_p</th><th>tasks</th></tr>",
  }
  local n = agg.tasks or #rows
  for _, p in ipairs(metrics.P) do
    local v = agg.fast_p and agg.fast_p[metrics.p_name(p)] or metrics.fast_p(rows, p)
    parts[#parts + 1] = string.format("<tr><td>fast_%s</td><td>%s</td><td>%s / %d</td></tr>", metrics.p_name(p), fmt(v), fmt_int(v * n), n)
  end
  parts[#parts + 1] = "</table><figure>"
  parts[#parts + 1] = report.svg_chart { series = { fast_curve_chart(rows) }, step = true, xmin = 0, ymin = 0,
    xlabel = "speedup threshold p", ylabel = "share of tasks correct and > p" }
  parts[#parts + 1] = "<figcaption>fast_p curve (share of all tasks correct and faster than p × baseline)</figcaption></figure></div>"
  parts[#parts + 1] = "<h2>Per task</h2><p class=\"sub\">median run of " .. esc(fmt_count(res["repeat"]))
    .. " repeats counts; cost is summed over all repeats</p>"
    .. "<table><tr><th>task</th><th>compiled</th><th>correct</th><th>speedup</th><th>latency</th><th>correct runs</th>"
    .. "<th>speedups of repeats</th><th>tokens</th><th>USD</th><th>device</th><th>wall</th></tr>"
  for _, r in ipairs(rows) do
    local sps = {}
    for _, x in ipairs(r.speedups or {}) do sps[#sps + 1] = x > 0 and string.format("%.2f", x) or "✗" end
    local c = r.cost or {}
    parts[#parts + 1] = string.format("<tr><td>%s</td>%s%s<td>%s</td><td>%s</td><td>%s / %s</td>"
      .. "<td>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td></tr>",
      esc(r.task), yn(r.compiled), yn(r.correct), fmt_x(r.speedup),
      r.latency_s and string.format("%.4g ms", r.latency_s * 1e3) or "–",
      fmt_count(r.correct_runs), fmt_count(r.repeats), esc(table.concat(sps, " ")),
      fmt_int((num(c.input_tokens) or 0) + (num(c.output_tokens) or 0)), fmt_usd(c.usd), fmt_s(c.device_s), fmt_s(c.wall_s))
  end
  parts[#parts + 1] = "</table>"
  local series = {}
  for i, r in ipairs(rows) do
    if b.runs[i] then series[#series + 1] = { name = r.task, points = b.runs[i].series } end
  end
  parts[#parts + 1] = "<h2>Progress of the median runs</h2>" .. progress_charts(series)
  parts[#parts + 1] = "<h2>Cost</h2>" .. cost_rows(cost)
  parts[#parts + 1] = "<h2>Search trees (median run of each task)</h2>" .. STATUS_KEYS
  for i, r in ipairs(rows) do
    local run = b.runs[i]
    if run then
      parts[#parts + 1] = string.format("<details%s><summary>%s — %s, %d nodes</summary>%s</details>",
        i == 1 and " open" or "", esc(r.task), fmt_x(r.speedup), #run.nodes, tree_section(run, store, "t" .. i .. ":"))
    end
  end
  return table.concat(parts)
end

local function value_text(v)
  if type(v) == "number" then return fmt_count(v) end
  if type(v) == "table" then
    local ok, j = pcall(html.encode_json, v)
    return ok and j or "…"
  end
  return tostring(v)
end

local function base_name(x)
  return x and (tostring(x):gsub("/+$", ""):match("([^/]+)$") or tostring(x)) or "–"
end

-- The parameter columns of a sweep table: strategy, target, seed, model if
-- they vary, then one column per `set` key used by any entry.
local function sweep_columns(entries)
  local keys, seen = {}, {}
  for _, e in ipairs(entries) do
    for k in pairs((e.params or {}).set or {}) do
      if not seen[k] then seen[k] = true; keys[#keys + 1] = k end
    end
  end
  table.sort(keys)
  return keys
end

local function sweep_body(sw, store)
  local res = sw.results
  local keys = sweep_columns(res.entries or {})
  local head = { "<h2>Results</h2><table><tr><th>#</th><th class=\"l\">entry</th><th class=\"l\">kind</th>",
    "<th class=\"l\">strategy</th><th class=\"l\">task / suite</th><th>seed</th>" }
  for _, k in ipairs(keys) do head[#head + 1] = "<th>" .. esc(k) .. "</th>" end
  head[#head + 1] = "<th>correct</th><th>best / geomean</th><th>geomean floored</th><th>fast_1</th>"
    .. "<th>tokens</th><th>USD</th><th>wall</th></tr>"
  local parts = { table.concat(head) }
  local bench_series, run_series = {}, {}
  for i, e in ipairs(res.entries or {}) do
    local label = e.label or (e.kind .. " " .. i)
    local c, correct, g, gf, f1 = {}, "–", "–", "–", "–"
    if e.kind == "bench" and e.aggregate then
      local a = e.aggregate
      c = a.cost or {}
      correct = string.format("%s / %s", fmt_count(a.correct), fmt_count(a.tasks))
      g, gf, f1 = fmt_x(a.geomean_speedup), fmt_x(a.geomean_speedup_floored), fmt(a.fast_p and a.fast_p["1"])
      if e.tasks then bench_series[#bench_series + 1] = fast_curve_chart(e.tasks, label) end
    elseif e.summary then
      local s = e.summary
      c = s.cost or {}
      correct = string.format("%s / %s nodes", fmt_count(s.correct_nodes), fmt_count(s.nodes))
      g = fmt_x(s.best and s.best.speedup)
      if sw.runs[i] then run_series[#run_series + 1] = { name = label, points = sw.runs[i].series } end
    elseif e.error then
      correct = "error: " .. tostring(e.error)
    end
    local p = e.params or {}
    local cells = { string.format('<tr><td>%d</td><td class="l">%s</td><td class="l">%s</td><td class="l">%s</td>'
      .. '<td class="l">%s</td><td>%s</td>', i, esc(label), esc(e.kind or "?"), esc(p.strategy or "–"),
      esc(base_name(p.task or p.suite)), esc(p.seed and value_text(p.seed) or "–")) }
    for _, k in ipairs(keys) do
      local v = (p.set or {})[k]
      cells[#cells + 1] = "<td>" .. esc(v == nil and "–" or value_text(v)) .. "</td>"
    end
    cells[#cells + 1] = string.format("<td>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td></tr>",
      esc(correct), g, gf, f1, fmt_int((num(c.input_tokens) or 0) + (num(c.output_tokens) or 0)), fmt_usd(c.usd), fmt_s(c.wall_s))
    parts[#parts + 1] = table.concat(cells)
  end
  parts[#parts + 1] = "</table>"
  local groups = sweep.groups(res)
  if #groups > 0 then
    parts[#parts + 1] = "<h2>By parameter</h2><p class=\"sub\">each value of each swept parameter over its runs "
      .. "(seeds and the other parameters): best speedup of a run (1.00× when it found no correct kernel), "
      .. "a bench's geomean over its tasks per repeat; median, a 95 % bootstrap interval of it, min–max</p><table><tr>"
      .. "<th class=\"l\">parameter</th><th class=\"l\">value</th><th>median</th><th>95 % interval</th><th>min</th>"
      .. "<th>max</th><th>n</th><th>correct</th></tr>"
    for _, g in ipairs(groups) do
      parts[#parts + 1] = string.format('<tr><td class="l">%s</td><td class="l">%s</td><td>%s</td><td>%s – %s</td><td>%s</td>'
        .. "<td>%s</td><td>%d</td><td>%d</td></tr>", esc(g.param), esc(g.value), fmt_x(g.median), fmt(g.low), fmt(g.high),
        fmt_x(g.min), fmt_x(g.max), g.n, g.correct)
    end
    parts[#parts + 1] = "</table>"
  end
  if #bench_series > 0 then
    parts[#parts + 1] = "<h2>fast_p curves</h2><div class=\"charts\"><figure>"
      .. report.svg_chart { series = bench_series, xmin = 0, ymin = 0, step = true,
      xlabel = "speedup threshold p", ylabel = "share of tasks correct and > p" } .. "</figure></div>"
  end
  if #run_series > 0 then parts[#parts + 1] = "<h2>Progress of single runs</h2>" .. progress_charts(run_series) end
  local trees = {}
  for i, e in ipairs(res.entries or {}) do
    local run = sw.runs[i]
    if run then
      trees[#trees + 1] = string.format("<details><summary>%s — %d nodes</summary>%s</details>",
        esc(e.label or ("run " .. i)), #run.nodes, tree_section(run, store, "e" .. i .. ":"))
    end
  end
  if #trees > 0 then parts[#parts + 1] = "<h2>Search trees</h2>" .. STATUS_KEYS .. table.concat(trees) end
  if res.totals and res.totals.cost then parts[#parts + 1] = "<h2>Total cost</h2>" .. cost_rows(res.totals.cost) end
  return table.concat(parts)
end

--- Render loaded data (from report.load) as one HTML page.
---@param data table
---@return string html
function report.html(data)
  if type(data) ~= "table" then error("report.html: data must be a table from report.load", 2) end
  local store = {}
  if data.kind == "run" then
    local s = data.summary or {}
    local title = string.format("%s on %s", s.strategy or data.run.strategy or "run", s.task or data.run.task or "?")
    return page(title, run_sub(data), run_body(data, store, ""), store)
  elseif data.kind == "bench" then
    local r = data.results
    local title = string.format("%s on suite %s", r.label or r.strategy or "?", r.suite_name or r.suite or "?")
    local bits = { "bench, " .. #(r.tasks or {}) .. " tasks × " .. fmt_count(r["repeat"]) .. " repeats" }
    if r.simulation then bits[#bits + 1] = "<b>" .. esc(r.simulation) .. "</b>" end
    if r.model then bits[#bits + 1] = "model <b>" .. esc(r.model_label or r.model) .. "</b>" end
    if r.started then bits[#bits + 1] = "started " .. esc(r.started) end
    if num(r.runs_done) and num(r.runs_total) and r.runs_done < r.runs_total then
      bits[#bits + 1] = string.format("<b>incomplete: %s of %s runs done</b> (tasks without a finished run count as failed)",
        fmt_count(r.runs_done), fmt_count(r.runs_total))
    end
    return page(title, table.concat(bits, " · "), bench_body(data, store), store)
  elseif data.kind == "sweep" then
    local r = data.results
    return page("sweep " .. (r.name or r.script or ""), string.format("%d entries", #(r.entries or {})), sweep_body(data, store), store)
  end
  error("report.html: unknown data kind " .. tostring(data.kind), 2)
end

--- Load PATH and write the HTML page to OUT (atomically).
---@param path string
---@param out string
---@return true|nil, table|nil err
function report.write(path, out)
  local data, err = report.load(path)
  if not data then return nil, err end
  local page_text = report.html(data)
  local ok, werr = fs.write(out, page_text, { atomic = true })
  if not ok then return nil, werr end
  return true, data
end

return report
