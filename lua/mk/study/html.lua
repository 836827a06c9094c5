--- mk.study.html: the pieces every page of the study floor is made of:
--- HTML escaping, inline SVG line charts and the self-contained page (inline
--- CSS and the node-panel script, data embedded as JSON). mk.study.report
--- and mk.study.compare both render with it, so neither needs the other.
local cjson = require("cjson")
local utf8_text = require("mk.services.text")

local html = {}

-- Encode data for a <script type="application/json"> block: no "<" may
-- appear raw, so "</script>" inside a kernel's source cannot end the block.
local page_json = cjson.new()
page_json.encode_invalid_numbers("null") -- a NaN metric must not break the page

--- JSON text of `v` as the page embeds it (a NaN becomes null); raises on
--- what JSON cannot hold (a function, a sparse array).
html.encode_json = page_json.encode

local function embed_json(v)
  local s = page_json.encode(utf8_text.clean(v)) -- a candidate's bytes may not be UTF-8
  return (s:gsub("<", "\\u003c"):gsub("\226\128\168", "\\u2028"):gsub("\226\128\169", "\\u2029"))
end

-- Formatting -------------------------------------------------------------

local function esc(s)
  return (utf8_text.utf8(tostring(s)):gsub("[&<>\"']", { ["&"] = "&amp;", ["<"] = "&lt;", [">"] = "&gt;", ['"'] = "&quot;", ["'"] = "&#39;" }))
end
html.escape = esc

-- SVG pieces -----------------------------------------------------------------

local function nice_ticks(lo, hi, n)
  if hi <= lo then hi = lo + 1 end
  local span = hi - lo
  local step = 10 ^ math.floor(math.log(span / n, 10))
  for _, m in ipairs({ 1, 2, 2.5, 5, 10 }) do
    if span / (step * m) <= n then step = step * m break end
  end
  local ticks = {}
  local v = math.ceil(lo / step - 1e-9) * step
  while v <= hi + step * 1e-9 do
    ticks[#ticks + 1] = v
    v = v + step
  end
  return ticks
end

local function tick_label(v)
  if math.abs(v) >= 1e6 then return string.format("%gM", v / 1e6) end
  if math.abs(v) >= 1e4 then return string.format("%gk", v / 1e3) end
  return string.format("%g", tonumber(string.format("%.4g", v)))
end

local PALETTE = { "#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22" }

-- Tick values of a log axis: powers of ten, or 1-2-5 steps when the axis
-- spans less than three decades.
local function log_ticks(lo, hi)
  local ticks = {}
  local e0, e1 = math.floor(math.log(lo, 10)), math.ceil(math.log(hi, 10))
  local mult = (e1 - e0) < 3 and { 1, 2, 5 } or { 1 }
  for e = e0, e1 do
    for _, m in ipairs(mult) do
      local v = m * 10 ^ e
      if v >= lo * (1 - 1e-9) and v <= hi * (1 + 1e-9) then ticks[#ticks + 1] = v end
    end
  end
  return ticks
end

-- A chart's frame (C below): the spec, its size and margins, the data's
-- ranges and the maps from data to picture coordinates.

-- The ranges of the data (points, bands, horizontal lines); nil when no
-- point can be drawn.
local function data_ranges(spec, usable)
  local xmin, xmax, ymin, ymax = spec.xmin, nil, spec.ymin, nil
  for _, s in ipairs(spec.series) do
    for _, p in ipairs(s.points) do
      if usable(p[1]) then
        xmin = math.min(xmin or p[1], p[1]); xmax = math.max(xmax or p[1], p[1])
        ymin = math.min(ymin or p[2], p[2]); ymax = math.max(ymax or p[2], p[2])
      end
    end
    for _, p in ipairs(s.band or {}) do
      if usable(p[1]) then ymin = math.min(ymin or p[2], p[2]); ymax = math.max(ymax or p[3], p[3]) end
    end
  end
  for _, y in ipairs(spec.hlines or {}) do
    ymin = math.min(ymin or y, y); ymax = math.max(ymax or y, y)
  end
  if not xmax then return nil end -- no point to draw (xmin may come from the spec)
  if xmax == xmin then xmax = spec.xlog and xmin * 10 or xmin + 1 end
  if ymax == ymin then ymax = ymin + 1 end
  return xmin, xmax, ymin, ymax + (ymax - ymin) * 0.08
end

-- Grid, ticks, axes, horizontal and vertical marker lines.
local function draw_axes(C, out)
  local spec, L, R, T, B, W, H, X, Y = C.spec, C.L, C.R, C.T, C.B, C.W, C.H, C.X, C.Y
  for _, v in ipairs(nice_ticks(C.ymin, C.ymax, 5)) do
    out[#out + 1] = string.format('<line class="grid" x1="%d" x2="%d" y1="%.1f" y2="%.1f"/>'
      .. '<text class="tick" x="%d" y="%.1f" text-anchor="end">%s</text>',
      L, W - R, Y(v), Y(v), L - 4, Y(v) + 4, esc(tick_label(v)))
  end
  for _, v in ipairs(spec.xlog and log_ticks(C.xmin, C.xmax) or nice_ticks(C.xmin, C.xmax, 6)) do
    out[#out + 1] = string.format('<text class="tick" x="%.1f" y="%d" text-anchor="middle">%s</text>', X(v), H - B + 15, esc(tick_label(v)))
  end
  out[#out + 1] = string.format('<line class="axis" x1="%d" x2="%d" y1="%d" y2="%d"/><line class="axis" x1="%d" x2="%d" y1="%d" y2="%d"/>',
    L, W - R, H - B, H - B, L, L, T, H - B)
  for _, y in ipairs(spec.hlines or {}) do
    out[#out + 1] = string.format('<line class="hline" x1="%d" x2="%d" y1="%.1f" y2="%.1f"/>', L, W - R, Y(y), Y(y))
  end
  for _, v in ipairs(spec.vlines or {}) do
    if C.usable(v.x) and v.x >= C.xmin and v.x <= C.xmax then
      local x = X(v.x)
      out[#out + 1] = string.format('<line class="hline" x1="%.1f" x2="%.1f" y1="%d" y2="%d"/>'
        .. '<text class="tick" x="%.1f" y="%d" text-anchor="%s">%s</text>', x, x, T, H - B, x - 3, T + 8,
        x > W - R - 40 and "end" or "middle", esc(v.label or ""))
    end
  end
end

-- A series' band: upper edge left to right, lower edge back.
local function draw_band(C, out, s, color)
  local X, Y = C.X, C.Y
  local up, down = {}, {}
  local prev
  for _, p in ipairs(s.band) do
    if C.usable(p[1]) then
      if C.spec.step and prev then
        up[#up + 1] = string.format("%.1f,%.1f", X(p[1]), Y(prev[3]))
        table.insert(down, 1, string.format("%.1f,%.1f", X(p[1]), Y(prev[2])))
      end
      up[#up + 1] = string.format("%.1f,%.1f", X(p[1]), Y(p[3]))
      table.insert(down, 1, string.format("%.1f,%.1f", X(p[1]), Y(p[2])))
      prev = p
    end
  end
  out[#out + 1] = string.format('<polygon class="band" fill="%s" fill-opacity="0.18" stroke="none" points="%s %s"/>',
    color, table.concat(up, " "), table.concat(down, " "))
end

-- A series' line (steps with spec.step) and its points with their labels.
local function draw_line(C, out, s, color)
  local X, Y = C.X, C.Y
  local d, pts = {}, {}
  for _, p in ipairs(s.points) do if C.usable(p[1]) then pts[#pts + 1] = p end end
  for j, p in ipairs(pts) do
    if j == 1 then
      d[#d + 1] = string.format("M%.1f,%.1f", X(p[1]), Y(p[2]))
    elseif C.spec.step then
      d[#d + 1] = string.format("H%.1fV%.1f", X(p[1]), Y(p[2]))
    else
      d[#d + 1] = string.format("L%.1f,%.1f", X(p[1]), Y(p[2]))
    end
  end
  out[#out + 1] = string.format('<path class="line" stroke="%s" d="%s"><title>%s</title></path>',
    color, table.concat(d), esc(s.name or ""))
  for _, p in ipairs(pts) do
    if not p.hide then
      out[#out + 1] = string.format('<circle class="pt" cx="%.1f" cy="%.1f" r="2.5" fill="%s"><title>%s</title></circle>',
        X(p[1]), Y(p[2]), color, esc((s.name and (s.name .. ": ") or "") .. (p.label or (tick_label(p[1]) .. ", " .. tick_label(p[2])))))
    end
  end
end

local function series_color(s, i) return s.color or PALETTE[(i - 1) % #PALETTE + 1] end

-- The legend below a chart of several series.
local function legend(series)
  local lg = { '<div class="legend">' }
  for i, s in ipairs(series) do
    lg[#lg + 1] = string.format('<span><i style="background:%s"></i>%s</span>', series_color(s, i), esc(s.name or ""))
  end
  lg[#lg + 1] = "</div>"
  return table.concat(lg)
end

--- A line chart as inline SVG. spec = {series = {{name=, points={{x,y}...},
--- color=, band={{x, lo, hi}...}}}, xlabel=, ylabel=, step=bool,
--- hlines={y...}, vlines={{x=, label=}...}, xlog=bool (log-scaled x axis;
--- points with x <= 0 are left out), width=, height=, ymin=, xmin=}. A
--- series' band is shaded around its line (e.g. the spread over repeats).
function html.svg_chart(spec)
  local C = { spec = spec, W = spec.width or 460, H = spec.height or 260, L = 56, R = 14, T = 14, B = 42 }
  local W, H, L, R, T, B = C.W, C.H, C.L, C.R, C.T, C.B
  C.usable = function(x) return not spec.xlog or x > 0 end
  local out = { string.format('<svg class="chart" viewBox="0 0 %d %d" width="%d" height="%d" role="img">', W, H, W, H) }
  C.xmin, C.xmax, C.ymin, C.ymax = data_ranges(spec, C.usable)
  if not C.xmin then
    out[#out + 1] = string.format('<text x="%d" y="%d" text-anchor="middle" class="muted">no data</text></svg>', W // 2, H // 2)
    return table.concat(out)
  end
  local xmin, xmax, ymin, ymax = C.xmin, C.xmax, C.ymin, C.ymax
  C.X = function(x)
    if spec.xlog then return L + math.log(x / xmin) / math.log(xmax / xmin) * (W - L - R) end
    return L + (x - xmin) / (xmax - xmin) * (W - L - R)
  end
  C.Y = function(y) return H - B - (y - ymin) / (ymax - ymin) * (H - T - B) end
  draw_axes(C, out)
  for i, s in ipairs(spec.series) do
    local color = series_color(s, i)
    if s.band and #s.band > 0 then draw_band(C, out, s, color) end
    draw_line(C, out, s, color)
  end
  out[#out + 1] = string.format('<text class="label" x="%d" y="%d" text-anchor="middle">%s</text>',
    (L + W - R) // 2, H - 6, esc(spec.xlabel or ""))
  out[#out + 1] = string.format('<text class="label" x="12" y="%d" text-anchor="middle" transform="rotate(-90 12 %d)">%s</text>',
    (T + H - B) // 2, (T + H - B) // 2, esc(spec.ylabel or ""))
  out[#out + 1] = "</svg>"
  if #spec.series > 1 then out[#out + 1] = legend(spec.series) end
  return table.concat(out)
end

-- Page -----------------------------------------------------------------------

local CSS = [[
:root{--fg:#1b1f24;--muted:#6a737d;--line:#d0d7de;--bg:#fff;--panel:#f6f8fa;--accent:#b8860b}
*{box-sizing:border-box}
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Helvetica,Arial,sans-serif;color:var(--fg);background:var(--bg);
  margin:0;padding:24px 32px;max-width:1400px}
h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;margin:28px 0 10px;border-bottom:1px solid var(--line);padding-bottom:4px}
h3{font-size:15px;margin:16px 0 6px}
.sub{color:var(--muted);margin-bottom:16px}
.noise{color:#9a6700;font-weight:600}
.cards{display:flex;flex-wrap:wrap;gap:10px}
.card{border:1px solid var(--line);border-radius:6px;padding:8px 14px;min-width:120px;background:var(--panel)}
.card b{display:block;font-size:20px}.card span{color:var(--muted);font-size:12px}
.card.pair{display:flex;gap:18px}
table{border-collapse:collapse;margin:6px 0}th,td{border-bottom:1px solid var(--line);padding:4px 10px;text-align:right;white-space:nowrap}
th{background:var(--panel);font-weight:600}td:first-child,th:first-child{text-align:left}
td.l,th.l{text-align:left}td.yes{color:#1a7f37}td.no{color:#cf222e}
.charts{display:flex;flex-wrap:wrap;gap:24px}.charts figure{max-width:480px;margin:0}
.charts figcaption{color:var(--muted);font-size:12px;text-align:center}
svg text{font:11px system-ui,sans-serif;fill:var(--fg)}
svg .tick,svg .muted{fill:var(--muted)}svg .label{font-size:12px}
svg .grid{stroke:#eaeef2}svg .axis{stroke:#8c959f}svg .hline{stroke:#8c959f;stroke-dasharray:4 3}
svg .line{fill:none;stroke-width:2}
.legend{font-size:12px;color:var(--muted)}
.legend span{margin-right:12px;display:inline-block;white-space:nowrap}
.legend i{display:inline-block;width:10px;height:10px;margin-right:4px;vertical-align:middle}
.tree-wrap{display:flex;gap:16px;align-items:flex-start}
.tree-scroll{overflow:auto;max-height:640px;border:1px solid var(--line);border-radius:6px;flex:1 1 auto;min-width:280px}
.panel{flex:0 0 440px;max-width:440px;border:1px solid var(--line);border-radius:6px;padding:10px 12px;background:var(--panel);
  max-height:640px;overflow:auto}
.panel pre{background:#fff;border:1px solid var(--line);padding:8px;overflow:auto;max-height:360px;
  font:12px/1.35 ui-monospace,SFMono-Regular,Menlo,monospace;white-space:pre}
.panel pre.plan{white-space:pre-wrap}
.panel table{width:100%}.panel .err{color:#cf222e;white-space:pre-wrap}
.edge{fill:none;stroke:#afb8c1;stroke-width:1.3}.edge.extra{stroke-dasharray:3 3}
.edge.bestpath{stroke:var(--accent);stroke-width:3.2}
.node{cursor:pointer}.node circle{stroke:#fff;stroke-width:1.5}
.node.onpath circle{stroke:var(--accent);stroke-width:3}.node.best circle{stroke:#000;stroke-width:3}
.node.sel circle{stroke:#0969da;stroke-width:4}
.node text{font-size:10px;fill:var(--muted)}
.st-fast circle{fill:#1a7f37}.st-ok circle{fill:#6fdd8b}.st-incorrect circle{fill:#fb8f44}.st-compile circle{fill:#cf222e}
.st-timeout circle{fill:#8250df}.st-crash circle{fill:#6e0f0f}.st-rejected circle{fill:#8c959f}.st-other circle{fill:#d0d7de}
.keys{font-size:12px;color:var(--muted);margin:6px 0}
.keys i{display:inline-block;width:10px;height:10px;border-radius:50%;margin:0 4px 0 10px;vertical-align:middle}
.bar{display:inline-block;height:10px;background:#0969da;vertical-align:middle}
details{margin:8px 0}summary{cursor:pointer;font-weight:600}
footer{margin-top:32px;color:var(--muted);font-size:12px}
@media print{.tree-scroll,.panel{max-height:none}}
]]

local JS = [[
(function(){
  var data = JSON.parse(document.getElementById('mk-data').textContent);
  function el(tag, cls, text){
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text != null) e.textContent = String(text);
    return e;
  }
  function row(t, k, v){ var tr = el('tr'); tr.appendChild(el('td', null, k)); tr.appendChild(el('td', null, v)); t.appendChild(tr); }
  function fmtv(v){
    if (typeof v === 'number') return Math.abs(v) >= 1e4 || v === Math.floor(v) ? String(v) : v.toPrecision(4);
    if (v && typeof v === 'object') return JSON.stringify(v);
    return String(v);
  }
  function show(g){
    var key = g.getAttribute('data-key');
    var n = data.nodes[key];
    var wrap = g.closest('.tree-wrap');
    var panel = wrap && wrap.querySelector('.panel');
    if (!n || !panel) return;
    wrap.querySelectorAll('.node.sel').forEach(function(x){ x.classList.remove('sel'); });
    g.classList.add('sel');
    panel.textContent = '';
    panel.appendChild(el('h3', null, 'node ' + n.id));
    var t = el('table');
    row(t, 'kind', n.kind || '–'); row(t, 'status', n.status || '–');
    row(t, 'parents', (Array.isArray(n.parents) ? n.parents : []).join(', ') || '(root)');
    if (n.t != null) row(t, 'time', n.t.toFixed(1) + ' s');
    Object.keys(n.metrics || {}).sort().forEach(function(k){ row(t, k, fmtv(n.metrics[k])); });
    Object.keys(n.cost || {}).sort().forEach(function(k){ row(t, 'cost.' + k, fmtv(n.cost[k])); });
    panel.appendChild(t);
    if (n.error){ panel.appendChild(el('h3', null, 'error')); panel.appendChild(el('div', 'err', n.error)); }
    panel.appendChild(el('h3', null, 'plan'));
    panel.appendChild(el('pre', 'plan', n.plan || '(no plan)'));
    Object.keys(n.files || {}).sort().forEach(function(f){
      panel.appendChild(el('h3', null, f));
      panel.appendChild(el('pre', 'code', n.files[f]));
    });
  }
  document.querySelectorAll('svg.tree .node').forEach(function(g){
    g.addEventListener('click', function(){ show(g); });
    g.addEventListener('keydown', function(e){ if (e.key === 'Enter' || e.key === ' ') { e.preventDefault(); show(g); } });
  });
  document.querySelectorAll('.tree-wrap').forEach(function(w){
    var g = w.querySelector('.node.best') || w.querySelector('.node');
    if (g) show(g);
  });
})();
]]

--- One self-contained page around `body` (HTML), with the report's CSS and
--- node-panel script; `store` maps tree node keys to node data (may be {}).
local function page(title, sub, body, store)
  return table.concat({
    "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">",
    "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">",
    "<title>", esc(title), "</title><style>", CSS, "</style></head><body>",
    "<h1>", esc(title), "</h1><div class=\"sub\">", sub, "</div>",
    body,
    "<footer>generated by mkengine ", esc(package.loaded["mk.home"] and package.loaded["mk.home"].version or ""), " · ",
    esc(os.date("!%Y-%m-%d %H:%M UTC")), "</footer>",
    "<script type=\"application/json\" id=\"mk-data\">", embed_json({ nodes = store }),
    "</script><script>", JS, "</script></body></html>\n",
  })
end

html.page = page

return html
