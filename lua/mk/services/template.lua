--- mk.services.template: the tiny template language of prompt files.
--- `{{name}}` is replaced by vars.name (tostring); `{{#name}}...{{/name}}`
--- keeps its body only when vars.name is non-empty (not nil, false, "" or
--- an empty table). Unknown placeholders raise, so a typo in a prompt file
--- is caught by the prompt tests instead of reaching a model.
local fs = require("mk.fs")

local template = {}

local function present(v)
  if v == nil or v == false or v == "" then return false end
  if type(v) == "table" and next(v) == nil then return false end
  return true
end

---@param text string
---@param vars table
---@return string
function template.render(text, vars)
  local out = text:gsub("{{#([%w_]+)}}\n?(.-){{/%1}}\n?", function(name, body)
    return present(vars[name]) and body or ""
  end)
  out = out:gsub("{{([%w_]+)}}", function(name)
    local v = vars[name]
    if v == nil then error("template: no value for {{" .. name .. "}}", 0) end
    return tostring(v)
  end)
  return out
end

local cache = {}

--- Load a template file (cached for the process); raises naming the file
--- when it cannot be read.
---@param path string
---@return string
function template.load(path)
  if not cache[path] then
    local text, err = fs.read(path)
    if not text then error("template: cannot read " .. path .. ": " .. err.message, 0) end
    cache[path] = text
  end
  return cache[path]
end

--- Cut a long text (an error, a profile) to about n characters for a
--- prompt, keeping its head AND its tail: compilers put the first error at
--- the top, Mosaic and Python tracebacks put the real cause at the end.
---@param s any
---@param n integer
---@return string
function template.clip(s, n)
  s = tostring(s or "")
  if #s <= n then return s end
  local head = n * 2 // 3
  local tail = n - head
  return s:sub(1, head) .. string.format("\n[... %d characters cut ...]\n", #s - n) .. s:sub(#s - tail + 1)
end

return template
