--- mk.eval.folder: the Lua files of a folder run as modules. A target is
--- found as a folder, not by module name (mk.eval.targets), so its
--- target.lua cannot `require` the files beside it; `loader(dir, ...)`
--- gives it a `need` that does what require does for them: runs a file of
--- the folder once and hands back its value. Every error names the file
--- by its whole path.
local M = {}

-- Lua shortens long chunk names in messages ("...ts/x/target.lua:2: msg");
-- put the whole path back so the error names the file.
local function with_full_path(msg, path)
  msg = tostring(msg)
  local short = msg:match("^(.-):%d+: ")
  if short and (short == path or (short:sub(1, 3) == "..." and path:sub(-(#short - 3)) == short:sub(4))) then
    return path .. msg:sub(#short + 1)
  end
  return path .. ": " .. msg
end

--- Run the Lua file `path` with the arguments `...` and return its value.
--- Raises "<path>:<line>: message", the path whole, when the file does not
--- load or raises.
---@param path string
---@return any
function M.run(path, ...)
  if type(path) ~= "string" then error("folder.run: path must be a string", 2) end
  local chunk, err = loadfile(path, "t")
  if not chunk then error(with_full_path(err, path), 0) end
  local ok, v = pcall(chunk, ...)
  if not ok then error(with_full_path(v, path), 0) end
  return v
end

--- A require for the Lua files of folder `dir`: `need(name)` runs
--- `dir/<name>.lua` the first time, with the arguments `(need, ...)` (the
--- `...` given here: a target hands its module table), and returns its
--- value (true when the file returns nothing), the same value on every
--- later call. A file that needs itself, directly or through others, is an
--- error naming it, as a loop of requires is.
---@param dir string
---@return fun(name: string): any need
function M.loader(dir, ...)
  if type(dir) ~= "string" or dir == "" then error("folder.loader: dir must be a non-empty string", 2) end
  local args = table.pack(...)
  local loaded, loading = {}, {}
  local need
  need = function(name)
    if type(name) ~= "string" or not name:match("^[%w_]+$") then
      error("folder: need: bad file name " .. tostring(name) .. " (a name of " .. dir .. " without .lua)", 2)
    end
    if loaded[name] ~= nil then return loaded[name] end
    local path = dir .. "/" .. name .. ".lua"
    if loading[name] then error("folder: " .. path .. " needs itself (a loop of need calls)", 2) end
    loading[name] = true
    local ok, v = pcall(M.run, path, need, table.unpack(args, 1, args.n))
    loading[name] = nil
    if not ok then error(v, 0) end
    if v == nil then v = true end
    loaded[name] = v
    return v
  end
  return need
end

return M
