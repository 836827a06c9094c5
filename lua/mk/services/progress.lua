--- mk.services.progress: the live status line of `run`, `bench` and `sweep`.
--- On a terminal one line is redrawn in place (carriage return + erase);
--- when the stream is not a terminal no control character is ever written:
--- only plain lines for milestones (`:note`). `quiet` writes nothing;
--- `json` writes every event as one JSON line to stdout instead.
---
--- Feed it events (the same tables a run appends to events.jsonl) with
--- `:event(ev)`, or set fields directly with `:set{...}`.
local cjson = require("cjson")
local task = require("mk.services.task")
local utf8_text = require("mk.services.text")

local progress = {}

local Progress = {}
Progress.__index = Progress

local function now() return task.now() end

--- Whether file descriptor 1 or 2 is a terminal (asked once, through
--- test(1), since plain Lua has no isatty).
function progress.isatty(fd)
  if os.getenv("MK_PROGRESS_TTY") then return os.getenv("MK_PROGRESS_TTY") == "1" end
  local ok = os.execute("test -t " .. math.tointeger(fd or 2))
  return ok == true
end

--- Create a status line.
---@param opts table|nil {quiet=bool, json=bool, stream=file (default io.stderr), out=file for json (default io.stdout),
---  tty=bool (default: detected on fd 2), interval=seconds between redraws (default 0.2), label=string, width=int,
---  clock=seconds function (default mk.services.task.now)}
function progress.new(opts)
  opts = opts or {}
  local clock = opts.clock or now
  local self = setmetatable({
    clock = clock,
    quiet = opts.quiet and true or false,
    json = opts.json and true or false,
    stream = opts.stream or io.stderr,
    out = opts.out or io.stdout,
    interval = opts.interval or 0.2,
    label = opts.label,
    width = opts.width or 118,
    start = clock(),
    last_draw = -math.huge,
    drawn = false,
    f = { nodes = 0, correct = 0, best = nil, tokens = 0, usd = 0, device_s = 0, replayed = 0 },
  }, Progress)
  if opts.tty ~= nil then self.tty = opts.tty
  elseif self.quiet or self.json then self.tty = false
  else self.tty = progress.isatty(2) end
  return self
end

local CORRECT = { ok = true, correct = true }

--- Update counters from one event: node events (type "node", fields or
--- `.node` with status/metrics), LLM calls (type "llm", input_tokens,
--- output_tokens, usd), evaluations (device_s). In json mode the event is
--- printed as a JSON line.
function Progress:event(ev)
  if type(ev) ~= "table" then error("progress:event: ev must be a table", 2) end
  if self.json then
    local ok, line = pcall(cjson.encode, utf8_text.clean(ev))
    if ok then self.out:write(line, "\n") self.out:flush() end
  end
  local f = self.f
  local ty = ev.type or ""
  if ty == "node" or ty == "node_added" then
    local n = type(ev.node) == "table" and ev.node or ev
    f.nodes = f.nodes + 1
    local m = type(n.metrics) == "table" and n.metrics or n
    if m.correct == true or (CORRECT[n.status or ""] and m.correct ~= false and n.kind ~= "root" and n.kind ~= "reference") then
      f.correct = f.correct + 1
      local s = tonumber(m.speedup)
      if m.timing_kind == "interpret" then
        f.interpret = true -- an interpreter's timing: no speedup shown
      elseif s and (not f.best or s > f.best) then
        f.best = s
      end
    end
  end
  local u = type(ev.usage) == "table" and ev.usage or ev
  if ty == "llm" or ty == "llm_call" then
    f.tokens = f.tokens + (tonumber(u.input_tokens) or 0) + (tonumber(u.output_tokens) or 0)
    f.usd = f.usd + (tonumber(u.usd) or tonumber(u.cost_usd) or tonumber(ev.cost_usd) or 0)
    if ev.cached == true then f.replayed = f.replayed + 1 end
  end
  if tonumber(ev.device_s) then
    f.device_s = f.device_s + tonumber(ev.device_s)
  elseif (ty == "node" or ty == "node_added") then
    -- a node's cost carries the device time of its evaluation
    local n = type(ev.node) == "table" and ev.node or ev
    if type(n.cost) == "table" and tonumber(n.cost.device_s) then f.device_s = f.device_s + tonumber(n.cost.device_s) end
  end
  self:draw()
end

--- Set fields directly (nodes, correct, best, tokens, usd, device_s,
--- text = extra words shown first).
function Progress:set(fields)
  for k, v in pairs(fields) do self.f[k] = v end
  self:draw()
end

--- The status line as plain text (no control characters).
function Progress:line()
  local f = self.f
  local el = self.clock() - self.start
  local parts = {}
  if self.label then parts[#parts + 1] = self.label end
  if f.text then parts[#parts + 1] = f.text end
  parts[#parts + 1] = string.format("nodes %d", f.nodes)
  parts[#parts + 1] = string.format("correct %d", f.correct)
  parts[#parts + 1] = "best " .. (f.best and string.format("%.2fx", f.best) or "-") ..
    (f.interpret and " (interpret timing)" or "")
  parts[#parts + 1] = string.format("tokens %d", math.floor(f.tokens))
  -- answers from the LLM cache cost nothing now: never shown as fresh work
  if (f.replayed or 0) > 0 then parts[#parts + 1] = string.format("replayed %d", f.replayed) end
  parts[#parts + 1] = string.format("$%.4f", f.usd)
  parts[#parts + 1] = string.format("device %d%%", el > 0 and math.floor(100 * math.min(1, f.device_s / el) + 0.5) or 0)
  parts[#parts + 1] = string.format("%dm%02ds", math.floor(el / 60), math.floor(el % 60))
  local s = table.concat(parts, " | ")
  if #s > self.width then s = s:sub(1, self.width - 1) .. "~" end
  return s
end

--- Redraw on a terminal (rate limited unless force).
function Progress:draw(force)
  if not self.tty then return end
  local t = self.clock()
  if not force and t - self.last_draw < self.interval then return end
  self.last_draw = t
  self.stream:write("\r\27[K", self:line())
  self.stream:flush()
  self.drawn = true
end

--- Print a milestone line (e.g. "softmax r2 done: 1.8x"). On a terminal it
--- goes above the status line; otherwise it is a plain line. Silent when
--- quiet or json.
function Progress:note(text)
  if self.quiet or self.json then return end
  if self.tty then
    self.stream:write("\r\27[K", text, "\n")
    self:draw(true)
  else
    self.stream:write(text, "\n")
  end
  self.stream:flush()
end

--- On a terminal, redraw every `interval` seconds (default 1) from a
--- background mk.services.task task so the elapsed time ticks while nothing else
--- happens (e.g. between bench runs). No-op elsewhere; stopped by finish.
function Progress:tick(interval)
  if not self.tty or self.ticker then return end
  if not task.current() then return end
  local me
  me = task.spawn(function()
    while true do
      task.sleep(interval or 1)
      -- finish may cancel us after the timer fired but before we ran: the
      -- sleep then returns normally, so look before drawing again
      if self.ticker ~= me then return end
      self:draw(true)
    end
  end)
  self.ticker = me
end

--- Clear the status line (terminal) so following output starts clean.
function Progress:finish()
  if self.ticker then
    self.ticker:cancel()
    self.ticker = nil
  end
  if self.tty and self.drawn then
    self.stream:write("\r\27[K")
    self.stream:flush()
  end
end

return progress
