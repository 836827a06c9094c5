--- mk.services.util: the small helpers several floors need, written once
--- (as Lua keeps its own in lauxlib): shell quoting, file-name slugs, JSON
--- files, deep copies and durations for people to read.
local fs = require("mk.fs")
local cjson = require("cjson.safe")

local M = {}

--- `s` quoted for a POSIX shell command line.
---@param s any
---@return string
function M.sh_quote(s) return "'" .. tostring(s):gsub("'", "'\\''") .. "'" end

--- A file-name-safe form of `s`: runs of characters other than letters,
--- digits and `_.=-` become `_`, leading `_`/`.` and trailing `_` go, at most
--- `max` characters (default 80); `fallback` (default "x") when nothing is left.
---@param s any
---@param fallback string|nil
---@param max integer|nil
---@return string
function M.slug(s, fallback, max)
  local v = tostring(s):gsub("[^%w_.=%-]+", "_"):gsub("^[_.]+", ""):gsub("_+$", "")
  v = v:sub(1, max or 80)
  return v ~= "" and v or (fallback or "x")
end

-- JSON null → nil, all the way down.
local function unnull(v)
  if v == cjson.null then return nil end
  if type(v) == "table" then for k, x in pairs(v) do v[k] = unnull(x) end end
  return v
end

--- The JSON value in file `path`, nulls as nil: value | nil when the file
--- is missing | nil, {kind = "corrupt", message} when it is not JSON.
---@param path string
---@return any
---@return table|nil err
function M.read_json(path)
  local text = fs.read(path)
  if not text then return nil end
  local v, err = cjson.decode(text)
  if v == nil then return nil, { kind = "corrupt", message = path .. ": " .. tostring(err) } end
  return unnull(v)
end

--- The JSON values of the lines of file `path`, nulls as nil; lines that
--- are not a JSON object or array (a torn last line of a killed writer)
--- are skipped; a missing file is an empty list. With `only`, just the
--- lines containing that text are decoded (one kind of event of a long log).
---@param path string
---@param only string|nil
---@return table[]
function M.read_jsonl(path, only)
  local text = fs.read(path)
  local out = {}
  if not text then return out end
  for line in text:gmatch("[^\n]+") do
    local v = (not only or line:find(only, 1, true)) and cjson.decode(line)
    if type(v) == "table" then out[#out + 1] = unnull(v) end
  end
  return out
end

--- The text that names a table of files by content: the names sorted, each
--- name NUL its content, joined by \1 (equal files, equal text).
---@param files table<string, string>
---@return string
function M.files_key(files)
  local names = {}
  for k in pairs(files) do names[#names + 1] = k end
  table.sort(names)
  local parts = {}
  for i, k in ipairs(names) do parts[i] = k .. "\0" .. tostring(files[k]) end
  return table.concat(parts, "\1")
end

local MESSAGE = { __tostring = function(e) return e.message end }

--- An error value: the table `fields` (kind, message, exit, ...), whose
--- tostring is its message (after `prefix` when given), so code switches on
--- `kind` and a person reads one line.
---@param fields table
---@param prefix string|nil
function M.error(fields, prefix)
  if prefix then return setmetatable(fields, { __tostring = function(e) return prefix .. e.message end }) end
  return setmetatable(fields, MESSAGE)
end

--- Raise M.error(fields, prefix), with no position prepended.
---@param fields table
---@param prefix string|nil
function M.raise(fields, prefix) error(M.error(fields, prefix), 0) end

--- A deep copy of `v` (tables copied all the way down; other values as is).
function M.copy(v)
  if type(v) ~= "table" then return v end
  local out = {}
  for k, x in pairs(v) do out[k] = M.copy(x) end
  return out
end

--- Seconds for people: "12.30 us", "4.512 ms", "3.21 s", "2.5 min", "1.20 h";
--- "–" for a non-number.
---@param x any
---@return string
function M.fmt_s(x)
  if type(x) ~= "number" or x ~= x then return "–" end
  if x < 1e-3 then return string.format("%.2f us", x * 1e6) end
  if x < 1 then return string.format("%.3f ms", x * 1e3) end
  if x < 120 then return string.format("%.2f s", x) end
  if x < 7200 then return string.format("%.1f min", x / 60) end
  return string.format("%.2f h", x / 3600)
end

return M
