--- mk.services.llm.sse: a server-sent-events parser fed one line at a time (the
--- lines mk.http hands over). An event is dispatched at its blank line as
--- on_event(name, data); `data:` lines of one event are joined with "\n".
local M = {}
M.__index = M

---@param on_event fun(name: string|nil, data: string)
function M.new(on_event)
  return setmetatable({ on_event = on_event, name = nil, data = nil, events = 0 }, M)
end

function M:dispatch()
  if self.data ~= nil then
    local name, data = self.name, self.data
    self.name, self.data = nil, nil
    self.events = self.events + 1
    return self.on_event(name, data)
  end
  self.name = nil
end

--- Feed one line (without its newline). Returns what on_event returned.
---@param line string
function M:line(line)
  if line == "" then return self:dispatch() end
  if line:byte(1) == 58 then return end -- ":" comment / keep-alive
  local field, value = line:match("^([^:]*):? ?(.*)$")
  if field == "data" then
    self.data = self.data and (self.data .. "\n" .. value) or value
  elseif field == "event" then
    self.name = value
  end
end

--- The body ended: dispatch an event left without its blank line.
function M:finish() return self:dispatch() end

return M
