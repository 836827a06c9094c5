--- mk.services.text: text from outside (a model's reply, a compiler's or a
--- kernel's output) made safe to write where readers expect valid UTF-8:
--- JSON files and lines, HTML reports. Invalid bytes become U+FFFD (the
--- replacement character, shown as such), valid text is returned as is.
local M = {}

M.REPLACEMENT = "\u{FFFD}"

--- `s` with every byte that is not part of a valid UTF-8 sequence (strict:
--- no surrogates, nothing above U+10FFFF) replaced by U+FFFD.
---@param s string
---@return string
function M.utf8(s)
  if utf8.len(s) then return s end
  local out, i, n = {}, 1, #s
  while i <= n do
    local ok, bad = utf8.len(s, i)
    if ok then
      out[#out + 1] = s:sub(i)
      break
    end
    out[#out + 1] = s:sub(i, bad - 1)
    out[#out + 1] = M.REPLACEMENT
    i = bad + 1
  end
  return table.concat(out)
end

--- A copy of `v` whose strings (keys included) are valid UTF-8; tables are
--- copied only where something changed (metatables are kept). Cycles are
--- left alone.
---@param v any
function M.clean(v, seen)
  if type(v) == "string" then return M.utf8(v) end
  if type(v) ~= "table" then return v end
  seen = seen or {}
  if seen[v] then return v end
  seen[v] = true
  local copy
  for k, x in pairs(v) do
    local k2, x2 = M.clean(k, seen), M.clean(x, seen)
    if k2 ~= k or x2 ~= x then
      if not copy then
        copy = {}
        for k3, x3 in pairs(v) do copy[k3] = x3 end
      end
      if k2 ~= k then copy[k] = nil end
      copy[k2] = x2
    end
  end
  if copy then return setmetatable(copy, getmetatable(v)) end
  return v
end

return M
