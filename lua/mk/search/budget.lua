--- mk.search.budget: a run's spending limits (tokens, USD, device seconds, wall
--- seconds) and what has been spent. The runner feeds it (LLM totals,
--- device time, or run events) and checks `exhausted()` before each new
--- expansion; strategies read `left()` to plan. Limits that are not set
--- are unlimited (math.huge).
local task_lib = require("mk.services.task")

local budget = {}

budget.KEYS = { "tokens", "usd", "device_s", "wall_s" }
local KNOWN = { tokens = true, usd = true, device_s = true, wall_s = true }

local function parse_number(s)
  local n, suffix = s:match("^%s*([%d%.eE+%-]+)%s*([kKmMgG]?)%s*$")
  n = tonumber(n)
  if not n then return nil end
  local mult = ({ k = 1e3, K = 1e3, m = 1e6, M = 1e6, g = 1e9, G = 1e9 })[suffix] or 1
  return n * mult
end

--- Parse "tokens=2e6,usd=5,device_s=600,wall_s=1h"-style text. Numbers
--- take k/M/G suffixes (tokens=500k); wall_s and device_s also take
--- s/m/h suffixes (wall_s=30m).
---@param text string
---@return table|nil limits, table|nil err {kind="bad_budget", message}
function budget.parse(text)
  if type(text) ~= "string" then error("budget.parse: text must be a string", 2) end
  local out = {}
  for item in text:gmatch("[^,]+") do
    local k, v = item:match("^%s*([%w_]+)%s*=%s*(.-)%s*$")
    if not k then return nil, { kind = "bad_budget", message = "budget item '" .. item .. "' is not NAME=VALUE" } end
    if not KNOWN[k] then
      return nil, { kind = "bad_budget", message = "unknown budget '" .. k .. "' (known: tokens, usd, device_s, wall_s)" }
    end
    local n
    if (k == "wall_s" or k == "device_s") and v:match("[smh]$") then
      local x, unit = v:match("^([%d%.eE+%-]+)([smh])$")
      n = tonumber(x)
      if n then n = n * ({ s = 1, m = 60, h = 3600 })[unit] end
    else
      n = parse_number(v)
    end
    if not n or n < 0 or n ~= n then
      return nil, { kind = "bad_budget", message = "budget " .. k .. " needs a number >= 0, got '" .. v .. "'" }
    end
    out[k] = k == "tokens" and (math.tointeger(math.floor(n)) or n) or n
  end
  if next(out) == nil then return nil, { kind = "bad_budget", message = "empty budget" } end
  return out
end

local Budget = {}
Budget.__index = Budget

local function default_clock() return task_lib.now end

--- A budget object. limits: {tokens=, usd=, device_s=, wall_s=} (a table
--- or budget.parse text; nil = unlimited). opts.clock: seconds function
--- (default mk.services.task.now); opts.used: spending carried over (resume).
---@param limits table|string|nil
---@param opts table|nil
function budget.new(limits, opts)
  opts = opts or {}
  if type(limits) == "string" then
    local l, err = budget.parse(limits)
    if not l then error("budget.new: " .. err.message, 2) end
    limits = l
  end
  local lim = {}
  for k, v in pairs(limits or {}) do
    if not KNOWN[k] then error("budget.new: unknown limit '" .. tostring(k) .. "'", 2) end
    if type(v) ~= "number" or v < 0 then error("budget.new: limit " .. k .. " must be a number >= 0", 2) end
    lim[k] = v
  end
  local clock = opts.clock or default_clock()
  local used = opts.used or {}
  return setmetatable({
    limits = lim,
    clock = clock,
    t0 = clock() - (used.wall_s or 0),
    spent = { tokens = used.tokens or 0, usd = used.usd or 0, device_s = used.device_s or 0 },
  }, Budget)
end

--- Add spending: {input_tokens=, output_tokens=, tokens=, usd=, device_s=}.
function Budget:charge(c)
  if type(c) ~= "table" then error("budget:charge: argument must be a table", 2) end
  local s = self.spent
  s.tokens = s.tokens + (tonumber(c.tokens) or 0) + (tonumber(c.input_tokens) or 0) + (tonumber(c.output_tokens) or 0)
  s.usd = s.usd + (tonumber(c.usd) or 0)
  s.device_s = s.device_s + (tonumber(c.device_s) or 0)
end

--- Replace spending with absolute totals (e.g. from the LLM ledger):
--- {tokens= or input_tokens+output_tokens, usd=, device_s=}; missing keys keep their value.
function Budget:set_used(totals)
  local s = self.spent
  if totals.tokens or totals.input_tokens or totals.output_tokens then
    s.tokens = (tonumber(totals.tokens) or 0) + (tonumber(totals.input_tokens) or 0) + (tonumber(totals.output_tokens) or 0)
  end
  if totals.usd then s.usd = totals.usd end
  if totals.device_s then s.device_s = totals.device_s end
end

--- Feed one run event: LLM calls (type "llm", with input_tokens,
--- output_tokens, usd, or a `usage` table) and anything with device_s.
function Budget:observe(ev)
  if type(ev) ~= "table" then return end
  if ev.type == "llm" or ev.type == "llm_call" then
    local u = type(ev.usage) == "table" and ev.usage or ev
    self:charge({ input_tokens = u.input_tokens, output_tokens = u.output_tokens,
                  usd = u.usd or u.cost_usd or ev.usd or ev.cost_usd })
  end
  if tonumber(ev.device_s) then self:charge({ device_s = ev.device_s }) end
end

--- What has been spent: {tokens, usd, device_s, wall_s}.
function Budget:used()
  return { tokens = self.spent.tokens, usd = self.spent.usd, device_s = self.spent.device_s, wall_s = self.clock() - self.t0 }
end

--- What is left per limit (math.huge where unlimited; never negative).
function Budget:left()
  local u, out = self:used(), {}
  for _, k in ipairs(budget.KEYS) do
    out[k] = self.limits[k] and math.max(0, self.limits[k] - u[k]) or math.huge
  end
  return out
end

--- The largest share of any limit spent (0 when nothing is limited).
function Budget:fraction()
  local u, f = self:used(), 0
  for _, k in ipairs(budget.KEYS) do
    local l = self.limits[k]
    if l then f = math.max(f, l > 0 and u[k] / l or 1) end
  end
  return f
end

--- Whether any limit is spent: true, reason ("tokens: 1000 of 1000") or false.
---@return boolean, string|nil
function Budget:exhausted()
  local u = self:used()
  for _, k in ipairs(budget.KEYS) do
    local l = self.limits[k]
    if l and u[k] >= l then
      return true, string.format("%s: %s of %s used", k, tostring(math.tointeger(u[k]) or string.format("%.4g", u[k])), tostring(l))
    end
  end
  return false
end

--- Whether any limit is set.
function Budget:limited() return next(self.limits) ~= nil end

return budget
