--- mk.services.json: canonical JSON for content keys. `canonical` encodes
--- with sorted keys and fixed number formatting, so equal values hash
--- equally (the LLM cache's request keys, the suite cache's content keys);
--- `decode` never raises on a body that is not JSON.
local cjson = require("cjson")

local M = { null = cjson.null }

local function esc(s)
  return '"' .. s:gsub('[%c"\\]', function(c)
    local map = { ['"'] = '\\"', ["\\"] = "\\\\", ["\n"] = "\\n", ["\r"] = "\\r", ["\t"] = "\\t" }
    return map[c] or string.format("\\u%04x", c:byte())
  end) .. '"'
end

local function is_array(t)
  local n = 0
  for k in pairs(t) do
    if math.type(k) ~= "integer" or k < 1 then return false end
    n = n + 1
  end
  return n == #t
end

local function enc(v, out)
  local ty = type(v)
  if ty == "string" then
    out[#out + 1] = esc(v)
  elseif ty == "number" then
    if math.type(v) == "integer" or (v == math.floor(v) and math.abs(v) < 2 ^ 53) then
      out[#out + 1] = string.format("%d", math.tointeger(v) or v)
    elseif v ~= v or v == math.huge or v == -math.huge then
      error("mk.services.json: cannot encode " .. tostring(v))
    else
      out[#out + 1] = string.format("%.17g", v)
    end
  elseif ty == "boolean" then
    out[#out + 1] = tostring(v)
  elseif v == nil or v == cjson.null then
    out[#out + 1] = "null"
  elseif ty == "table" then
    if next(v) ~= nil and is_array(v) then
      out[#out + 1] = "["
      for i = 1, #v do
        if i > 1 then out[#out + 1] = "," end
        enc(v[i], out)
      end
      out[#out + 1] = "]"
    else
      local keys = {}
      for k, x in pairs(v) do
        if type(x) ~= "function" then keys[#keys + 1] = tostring(k) end
      end
      table.sort(keys)
      out[#out + 1] = "{"
      for i, k in ipairs(keys) do
        if i > 1 then out[#out + 1] = "," end
        out[#out + 1] = esc(k)
        out[#out + 1] = ":"
        local x = v[k]
        if x == nil then x = v[tonumber(k)] end
        enc(x, out)
      end
      out[#out + 1] = "}"
    end
  else
    error("mk.services.json: cannot encode a " .. ty)
  end
end

--- Deterministic JSON text: object keys sorted, integral numbers as integers.
---@param v any
---@return string
function M.canonical(v)
  local out = {}
  enc(v, out)
  return table.concat(out)
end

--- Encode for a request body (cjson; empty tables become {}).
function M.encode(v) return cjson.encode(v) end

--- Decode; returns value or nil, message (never raises).
---@param s string
function M.decode(s)
  if type(s) ~= "string" then return nil, "not a string" end
  local ok, v = pcall(cjson.decode, s)
  if not ok then return nil, tostring(v) end
  return v
end

--- An empty JSON array (cjson encodes an empty Lua table as {}).
M.empty_array = cjson.empty_array

--- v if it is a non-null value of type ty, else nil (cjson.null is userdata).
local NULL = cjson.null
function M.get(v, ty)
  if v == nil or v == NULL or (ty and type(v) ~= ty) then return nil end
  return v
end

--- Integer count from a decoded JSON number (cjson gives 17.0 for 17).
function M.int(v)
  if type(v) ~= "number" then return nil end
  return math.tointeger(v) or math.floor(v + 0.5)
end

return M
