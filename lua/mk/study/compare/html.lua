--- mk.study.compare.html: a comparison (mk.study.compare.run's result and
--- its anytime curves) as one self-contained HTML page, with mk.study.html's
--- pieces: verdicts, the strategies at the budget, the anytime curves per
--- resource, and per pair a forest plot of the per-task ratios with their
--- intervals and the per-task table.
local html = require("mk.study.html")
local RESOURCES = require("mk.study.compare.budget").RESOURCES
local text = require("mk.study.compare.text")
local fx, tok = text.fx, text.tok

local M = {}

-- A forest plot of per-task ratios with their intervals on a log axis, the
-- overall geomean and its interval last.
local function forest_svg(rows, overall, esc)
  local W, rowh, L, R, T = 560, 20, 150, 20, 24
  local lo, hi = 1, 1
  for _, r in ipairs(rows) do lo, hi = math.min(lo, r.ci_low, r.ratio), math.max(hi, r.ci_high, r.ratio) end
  lo, hi = math.min(lo, overall.ci_low), math.max(hi, overall.ci_high)
  lo, hi = lo / 1.15, hi * 1.15
  local n = #rows + 1
  local H = T + n * rowh + 34
  local function X(x) return L + math.log(x / lo) / math.log(hi / lo) * (W - L - R) end
  local out = { string.format('<svg class="chart forest" viewBox="0 0 %d %d" width="%d" height="%d" role="img">', W, H, W, H) }
  -- the finest tick set that keeps at most 9 labels on the axis
  local ticks
  for _, set in ipairs({ { 0.5, 0.67, 0.8, 0.9, 1, 1.1, 1.25, 1.5, 2 }, { 0.25, 0.5, 0.75, 1, 1.5, 2, 3, 4 },
                         { 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 20, 50, 100 }, { 0.001, 0.01, 0.1, 1, 10, 100, 1000 } }) do
    ticks = {}
    for _, v in ipairs(set) do if v >= lo and v <= hi then ticks[#ticks + 1] = v end end
    local covers = set[1] <= lo and set[#set] >= hi
    if covers and #ticks <= 9 then break end
  end
  for _, v in ipairs(ticks) do
    out[#out + 1] = string.format('<line class="%s" x1="%.1f" x2="%.1f" y1="%d" y2="%d"/><text class="tick" x="%.1f" y="%d" '
      .. 'text-anchor="middle">%g</text>', v == 1 and "hline" or "grid", X(v), X(v), T - 6, H - 30, X(v), H - 16, v)
  end
  local function row(i, label, r, cls)
    local y = T + (i - 0.5) * rowh
    out[#out + 1] = string.format('<text x="%d" y="%.1f" text-anchor="end"%s>%s</text>', L - 8, y + 4,
      cls and ' font-weight="600"' or "", esc(label))
    out[#out + 1] = string.format('<line x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f" stroke="#1f77b4" stroke-width="2"/>',
      X(r.ci_low), X(r.ci_high), y, y)
    out[#out + 1] = string.format('<%s fill="%s"><title>%s: %.2f× (%.2f–%.2f)</title></%s>',
      cls and string.format('rect x="%.1f" y="%.1f" width="9" height="9"', X(r.ratio) - 4.5, y - 4.5)
        or string.format('circle cx="%.1f" cy="%.1f" r="4"', X(r.ratio), y),
      cls and "#d62728" or "#1f77b4", esc(label), r.ratio, r.ci_low, r.ci_high, cls and "rect" or "circle")
  end
  for i, r in ipairs(rows) do row(i, r.task, r) end
  row(n, "geomean", { ratio = overall.geomean_ratio, ci_low = overall.ci_low, ci_high = overall.ci_high }, true)
  out[#out + 1] = string.format('<text class="label" x="%d" y="%d" text-anchor="middle">ratio B/A (log scale; right of 1 = B faster)</text>',
    (L + W - R) // 2, H - 2)
  out[#out + 1] = "</svg>"
  return table.concat(out)
end

local RES_LABEL = { tokens = "tokens per run (input + output)", usd = "USD per run", llm_s = "LLM seconds per run",
  device_s = "device seconds per run", wall_s = "wall seconds per run" }

--- The comparison as one self-contained HTML page (mk.report's page):
--- verdicts, the strategies at the budget, anytime curves per resource
--- (median over repeats as a line, the spread as a band, log budget axis,
--- the budget marked), the per-task ratio chart with intervals and the
--- per-task table.
---@param result table from compare.run
---@param curves table from compare.curves
---@return string html
function M.page(result, curves)
  local esc = html.escape
  local P = {}
  P[#P + 1] = "<h2>Verdict</h2>"
  for _, p in ipairs(result.pairs) do
    P[#P + 1] = '<p class="verdict"><b>' .. esc(p.verdict) .. "</b></p>"
    if p.suggest and not p.suggest.decided then P[#P + 1] = '<p class="sub">repeats: ' .. esc(p.suggest.reason) .. "</p>" end
  end
  P[#P + 1] = "<h2>At the budget</h2><p class=\"sub\">" .. esc(result.budget.text)
    .. (result.budget.source == "default" and " (default: the largest run of the bench that spent least)" or "")
    .. "; each run counts the best kernel found within it; spend columns: what the runs spent in all</p>"
  P[#P + 1] = "<table><tr><th>strategy</th><th>tasks</th><th>compiled</th><th>correct</th><th>geomean</th><th>floored</th>"
    .. "<th>fast_1</th><th>runs cut</th><th>unverified</th><th>tokens</th><th>USD</th><th>LLM s</th><th>device s</th><th>wall s</th></tr>"
  for _, s in ipairs(result.strategies) do
    local c = s.spent
    P[#P + 1] = string.format("<tr><td>%s</td><td>%d</td><td>%d</td><td>%d</td><td>%s</td><td>%s</td><td>%.2f</td>"
      .. "<td>%d / %d</td><td>%d</td><td>%d</td><td>$%.4f</td><td>%.1f</td><td>%.1f</td><td>%.1f</td></tr>",
      esc(s.name), s.tasks, s.compiled, s.correct, fx(s.geomean_speedup), fx(s.geomean_speedup_floored), s.fast_p["1"] or 0,
      s.runs_cut, s.runs, s.unverified_runs, tok(c), c.usd or 0, c.llm_s or 0, c.device_s or 0, c.wall_s or 0)
  end
  P[#P + 1] = "</table>"
  for _, note in ipairs(text.notes(result.strategies)) do P[#P + 1] = '<p class="sub">' .. esc(note) .. "</p>" end
  P[#P + 1] = "<h2>Anytime curves</h2><p class=\"sub\">geomean over tasks of the median repeat's best correct speedup "
    .. "(failed = 1.0) within a budget per run; band: lowest to highest suite geomean over repeats</p>"
  local unv, runs = 0, 0
  for _, s in ipairs(result.strategies) do unv, runs = unv + s.unverified_runs, runs + s.runs end
  if unv > 0 then
    P[#P + 1] = string.format("<p class=\"sub\"><b>unverified nodes:</b> the runner re-checks only a run's final best "
      .. "kernel on held-out inputs; %d of %d runs count, at the budget, a node that check never saw, and the curves "
      .. "count such nodes too (nodes that failed it never count)</p>", unv, runs)
  end
  P[#P + 1] = "<div class=\"charts\">"
  for _, r in ipairs(RESOURCES) do
    local by = curves and curves[r]
    if by then
      local series = {}
      for _, s in ipairs(result.strategies) do
        local pts, band = {}, {}
        for _, p in ipairs(by[s.name] or {}) do
          pts[#pts + 1] = { p[1], p[2], hide = true }
          band[#band + 1] = { p[1], p[3], p[4] }
        end
        series[#series + 1] = { name = s.name, points = pts, band = band }
      end
      local vl = result.budget.limits[r] and { { x = result.budget.limits[r], label = "budget" } } or nil
      P[#P + 1] = "<figure>" .. html.svg_chart { series = series, step = true, xlog = true, hlines = { 1 }, vlines = vl,
        xlabel = RES_LABEL[r], ylabel = "best speedup (×)" } .. "<figcaption>best correct speedup within a budget of "
        .. esc(RES_LABEL[r]) .. "</figcaption></figure>"
    end
  end
  P[#P + 1] = "</div>"
  for _, p in ipairs(result.pairs) do
    local rows = {}
    for _, r in ipairs(result.per_task) do if r.b == p.b then rows[#rows + 1] = r end end
    P[#P + 1] = string.format("<h2>%s vs %s per task</h2><p class=\"sub\">ratio of median-repeat speedups %s/%s; "
      .. "bars: %g %% bootstrap interval over repeats (per task) and over tasks and repeats (geomean)</p>",
      esc(p.b), esc(p.a), esc(p.b), esc(p.a), p.level * 100)
    P[#P + 1] = forest_svg(rows, p, esc)
    P[#P + 1] = string.format("<table><tr><th>task</th><th>%s</th><th>%s</th><th>ratio</th><th>interval</th><th>repeats %s</th>"
      .. "<th>repeats %s</th><th>outcome</th></tr>", esc(p.a), esc(p.b), esc(p.a), esc(p.b))
    for _, r in ipairs(rows) do
      local function list(xs)
        local t = {}
        for i, x in ipairs(xs) do t[i] = string.format("%.2f", x) end
        return table.concat(t, " ")
      end
      P[#P + 1] = string.format("<tr><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%.2f–%.2f</td><td>%s</td><td>%s</td>"
        .. "<td>%s</td></tr>", esc(r.task), fx(r.a_speedup), fx(r.b_speedup), fx(r.ratio), r.ci_low, r.ci_high,
        list(r.a_speedups), list(r.b_speedups), r.outcome)
    end
    P[#P + 1] = string.format("</table><p class=\"sub\">wins %d, ties %d (repeat ranges overlap), losses %d of %d tasks</p>",
      p.wins, p.ties, p.losses, p.tasks)
  end
  local names = {}
  for _, s in ipairs(result.strategies) do names[#names + 1] = s.name end
  local sub = string.format("suite <b>%s</b> · %s", esc(result.strategies[1].suite or "?"), esc(result.budget.text))
  return html.page("compare " .. table.concat(names, " vs "), sub, table.concat(P), {})
end

return M
