-- mk.services.progress: the status line on a terminal, plain output elsewhere,
-- --quiet and --json.
local t = dofile("tests/lua/lib/t.lua")
local cjson = require "cjson"
local progress = require "mk.services.progress"

local function sink()
  local s = { buf = {} }
  function s:write(...) for _, x in ipairs({ ... }) do self.buf[#self.buf + 1] = tostring(x) end return self end
  s.flush = function() end
  function s:text() return table.concat(self.buf) end
  return s
end

local function clock(t0)
  local c = { t = t0 or 0 }
  return c, function() return c.t end
end

local EVENTS = {
  { t = 1, type = "llm", input_tokens = 1000, output_tokens = 200, usd = 0.01 },
  { t = 2, type = "node", node = { id = "1", status = "ok", metrics = { speedup = 1.0 } } },
  { t = 3, type = "evaluation", device_s = 5 },
  { t = 4, type = "node", node = { id = "2", status = "compile_error" } },
  { t = 5, type = "node", node = { id = "3", status = "ok", metrics = { speedup = 1.75 } } },
}

t.test("status line counts nodes, correct, best, tokens, USD, device busy % and elapsed", function()
  local c, fn = clock(100)
  local p = progress.new { tty = false, stream = sink(), clock = fn, label = "beam/softmax" }
  for _, ev in ipairs(EVENTS) do p:event(ev) end
  c.t = 100 + 20
  t.eq(p:line(), "beam/softmax | nodes 3 | correct 2 | best 1.75x | tokens 1200 | $0.0100 | device 25% | 0m20s")
end)

t.test("model calls replayed from the LLM cache are counted on the status line", function()
  local c, fn = clock(0)
  local p = progress.new { tty = false, stream = sink(), clock = fn }
  p:event { type = "llm", input_tokens = 10, output_tokens = 5, cached = true }
  p:event { type = "llm", input_tokens = 10, output_tokens = 5, cached = false }
  p:event { type = "llm", input_tokens = 10, output_tokens = 5, cached = true }
  c.t = 1
  t.contains(p:line(), "| tokens 45 | replayed 2 |")
end)

t.test("device time comes from node costs; a reference node is not counted as correct", function()
  local c, fn = clock(0)
  local p = progress.new { tty = false, stream = sink(), clock = fn }
  p:event { type = "node", id = "n0001", kind = "reference", status = "ok", metrics = { speedup = 1 } }
  p:event { type = "node", id = "n0002", kind = "implement", status = "ok", metrics = { speedup = 3 }, cost = { device_s = 2 } }
  c.t = 10
  t.matches(p:line(), "^nodes 2 | correct 1 | best 3%.00x | .* | device 20%% |")
end)

t.test("not a terminal: no control characters, milestones as plain lines", function()
  local s = sink()
  local _, fn = clock()
  local p = progress.new { tty = false, stream = s, clock = fn }
  for _, ev in ipairs(EVENTS) do p:event(ev) end
  p:note("softmax r1 ran 1.75x")
  p:finish()
  t.eq(s:text(), "softmax r1 ran 1.75x\n")
  t.eq(s:text():gsub("\n", ""):find("%c"), nil, "no control character besides newlines")
end)

t.test("on a terminal the line is redrawn in place and cleared at the end", function()
  local s = sink()
  local c, fn = clock()
  local p = progress.new { tty = true, stream = s, clock = fn, interval = 0.5 }
  p:event(EVENTS[1])
  p:event(EVENTS[2]) -- within the interval: not redrawn
  c.t = 1
  p:event(EVENTS[5])
  p:finish()
  local txt = s:text()
  local _, draws = txt:gsub("\r\27%[K", "")
  t.eq(draws, 3) -- two draws + the final clear
  t.contains(txt, "best 1.75x")
  t.eq(txt:sub(-4), "\r\27[K")
end)

t.test("quiet writes nothing; json writes each event as one JSON line", function()
  local s, o = sink(), sink()
  local p = progress.new { quiet = true, stream = s, out = o }
  for _, ev in ipairs(EVENTS) do p:event(ev) end
  p:note("x")
  p:finish()
  t.eq(s:text(), "")
  t.eq(o:text(), "")
  local s2, o2 = sink(), sink()
  local pj = progress.new { json = true, stream = s2, out = o2 }
  for _, ev in ipairs(EVENTS) do pj:event(ev) end
  pj:note("x")
  t.eq(s2:text(), "")
  local lines = {}
  for l in o2:text():gmatch("[^\n]+") do lines[#lines + 1] = cjson.decode(l) end
  t.eq(#lines, 5)
  t.eq(lines[3].device_s, 5)
end)

t.test("tick redraws the line periodically on a terminal until finish", function()
  local task = require "mk.services.task"
  local s = sink()
  local p = progress.new { tty = true, stream = s, interval = 0 }
  p:tick(0.01)
  task.sleep(0.055)
  p:finish()
  local _, draws = s:text():gsub("\r\27%[K", "")
  t.ok(draws >= 2, "a tick redraw and the final clear, got " .. draws)
  local before = #s:text()
  task.sleep(0.03)
  t.eq(#s:text(), before, "no redraw after finish")
  local q = progress.new { tty = false, stream = sink() }
  q:tick(0.01)
  t.eq(q.ticker, nil)
end)

t.test("finish stops the ticker even when its timer already fired", function()
  -- the ticker's sleep completes (timer due) and finish cancels it before it
  -- runs: it must not draw once more after the final clear
  local task = require "mk.services.task"
  local s = sink()
  local p = progress.new { tty = true, stream = s, interval = 0 }
  p:tick(0)
  task.yield() -- the ticker starts and arms its timer
  local t0 = task.now()
  while task.now() - t0 < 0.003 do end -- the timer is now due
  task.yield() -- the loop fires it: the ticker is queued behind us
  p:finish()
  local after = s:text()
  task.yield()
  task.yield()
  t.eq(s:text(), after, "no redraw after finish")
end)

t.test("a long line is cut to the width", function()
  local p = progress.new { tty = false, stream = sink(), width = 30, label = string.rep("x", 50) }
  t.eq(#p:line(), 30)
end)

return t.run()
