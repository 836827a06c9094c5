--- mk.targets: finds the target of a task directory and loads the task.
--- A target module (lua/mk/targets/<name>.lua) implements detect/load and
--- freeze/compile/test/bench/profile/baseline/tunables; see
--- docs/api/targets.md for the interface every target keeps.
local fs = require "mk.fs"

local M = {}

-- Detection order: our task.lua first (it may name any target), then the
-- foreign layouts that only `pallas` understands.
M.known = { "c", "pallas" }

local function bad(msg) return nil, { kind = "bad_task", message = msg } end

--- The target module called `name`.
---@param name string
---@return table
function M.get(name)
  if type(name) ~= "string" or not name:match("^[%w_]+$") then
    error("targets.get: bad target name " .. tostring(name), 2)
  end
  local ok, mod = pcall(require, "mk.targets." .. name)
  if not ok then error("targets.get: unknown target '" .. name .. "': " .. tostring(mod), 2) end
  return mod
end

local function task_lua_target(dir)
  local path = dir .. "/task.lua"
  if not fs.exists(path) then return nil end
  local src = fs.read(path)
  if not src then return nil end
  -- cheap look at `target = "..."` without running the file
  local t = src:match("%f[%w_]target%s*=%s*[\"']([%w_]+)[\"']")
  if t then return t end
  if fs.exists(dir .. "/reference.c") then return "c" end
  return nil
end

--- The target name load_task would use for `dir`, or nil.
---@param dir string
---@return string|nil
function M.detect(dir)
  if type(dir) ~= "string" then error("targets.detect: dir must be a string", 2) end
  if not fs.isdir(dir) then return nil end
  local t = task_lua_target(dir)
  if t then return t end
  for _, name in ipairs(M.known) do
    local ok, mod = pcall(require, "mk.targets." .. name)
    if ok and type(mod) == "table" and mod.detect and mod.detect(dir) then return name end
  end
  return nil
end

--- Load the task in `dir`: task | nil, {kind = "bad_task", message}.
---@param dir string
---@return table|nil task
---@return table|nil err
function M.load_task(dir)
  if type(dir) ~= "string" then error("targets.load_task: dir must be a string", 2) end
  if not fs.isdir(dir) then return bad("task directory not found: " .. dir) end
  local abs = fs.realpath(dir) or dir
  local name = M.detect(abs)
  if not name then
    return bad(dir .. " is not a task: expected task.lua + reference.c (C), baseline.py (JAXBench) "
      .. "or reference.py + kernel_task.yaml (MaxKernel)")
  end
  local ok, mod = pcall(require, "mk.targets." .. name)
  if not ok then return bad("task " .. dir .. " needs target '" .. name .. "', which is not available: " .. tostring(mod)) end
  return mod.load(abs)
end

return M
