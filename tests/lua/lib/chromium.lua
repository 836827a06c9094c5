-- Headless Chromium for report tests: load a page with a probe script
-- injected and read back what the probe saw (console errors, uncaught
-- errors, tree nodes, the node panel after a click, charts). Skips the test
-- when Chromium is not installed (scripts/packages/report.txt lists it).
local cjson = require "cjson"
local fs = require "mk.fs"

local M = {}

local PROBE = [[
<script>
window.__errs = [];
window.addEventListener('error', function (e) { window.__errs.push('error: ' + e.message); });
(function () {
  var ce = console.error;
  console.error = function () {
    window.__errs.push('console.error: ' + Array.prototype.join.call(arguments, ' '));
    ce.apply(console, arguments);
  };
})();
window.addEventListener('load', function () { setTimeout(function () {
  var counts = [];
  document.querySelectorAll('svg.tree').forEach(function (s) {
    counts.push([s.querySelectorAll('.node').length, Number(s.getAttribute('data-nodes'))]);
  });
  var gs = document.querySelectorAll('svg.tree .node');
  var g = gs[gs.length > 1 ? 1 : 0], head = null, code = null;
  if (g) {
    g.dispatchEvent(new MouseEvent('click', { bubbles: true }));
    var p = g.closest('.tree-wrap').querySelector('.panel');
    head = p.querySelector('h3') && p.querySelector('h3').textContent;
    code = p.querySelector('pre.code') && p.querySelector('pre.code').textContent;
  }
  var r = document.createElement('div');
  r.id = 'mk-probe';
  r.setAttribute('data-result', JSON.stringify({ errors: window.__errs, nodes: gs.length, counts: counts,
    clicked: g ? g.getAttribute('data-key') : null, head: head, code: code, xss: !!window.__xss,
    charts: document.querySelectorAll('svg.chart').length }));
  document.body.appendChild(r);
}, 0); });
</script>
]]

function M.find()
  for _, c in ipairs({ "/usr/bin/chromium", "/usr/bin/chromium-browser" }) do
    if fs.exists(c) then return c end
  end
end

local function html_unescape(s)
  return (s:gsub("&quot;", '"'):gsub("&lt;", "<"):gsub("&gt;", ">"):gsub("&#39;", "'"):gsub("&amp;", "&"))
end

--- Load `html` (with the probe injected) in headless Chromium, writing
--- files under `dir` named after `name`; returns the probe's result table
--- {errors, nodes, counts, clicked, head, code, xss, charts}. `t` is the
--- test library (for skip/fail/ok).
function M.probe(t, html, dir, name)
  local chromium = M.find()
  if not chromium then t.skip("chromium not installed (apt-get install chromium)") end
  local page = dir .. "/" .. name .. ".probe.html"
  fs.write(page, (html:gsub("<head>", function() return "<head>" .. PROBE end, 1)))
  local profile = fs.tmpdir("mk-chromium-")
  local dom = dir .. "/" .. name .. ".dom"
  local cmd = string.format("timeout 90 %s --headless --no-sandbox --disable-gpu --disable-background-networking "
    .. "--disable-component-update --disable-sync --no-first-run --user-data-dir=%s --virtual-time-budget=3000 "
    .. "--dump-dom 'file://%s' > '%s' 2>'%s.err'", chromium, profile, page, dom, dom)
  local ok = os.execute(cmd)
  fs.rm_rf(profile)
  local out = fs.read(dom) or ""
  if not ok then t.fail("chromium failed: " .. (fs.read(dom .. ".err") or ""):sub(-2000)) end
  local attr = out:match('id="mk%-probe" data%-result="(.-)"') or out:match('data%-result="(.-)" id="mk%-probe"')
  t.ok(attr, "probe result in the dumped DOM")
  return cjson.decode(html_unescape(attr))
end

return M
