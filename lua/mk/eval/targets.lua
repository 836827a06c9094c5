--- mk.eval.targets: the targets, each one discovered folder, and the
--- loading of a task. A target folder `targets/<name>/` holds
---   target.lua      the interface module (detect/load, freeze, compile,
---                   test, bench, profile, baseline, tunables; see
---                   docs/api/targets.md and docs/targets/writing-a-target.md)
---   persona.lua     what the sub-agents tell a model about the target
---                   ({target_desc, lang, rules, tune_syntax})
---   directions.lua  optional: the menu of optimisation ideas beam samples
---   kb/*.md         optional: knowledge-base notes only this target gets
---   CMakeLists.txt  optional: harness programs to build
---   <part>.lua      optional: the rest of the target's Lua (its phases,
---                   helpers), which target.lua loads with
---                   mk.eval.folder.loader(dir): it is run with the
---                   arguments (name, folder)
--- Folders are searched in the engine's targets/, then in each directory of
--- $MKENGINE_TARGETS (':'-separated), then in directories given to
--- `targets.add_dir`; the first folder of a name wins. A missing or broken
--- file is an error naming the file, never a silent fallback.
local fs = require("mk.fs")
local home = require("mk.home")
local folder = require("mk.eval.folder")

local M = {}

local extra_dirs = {}
local loaded = {} -- name -> module

local function bad(msg) return nil, { kind = "bad_task", message = msg } end

local function valid_name(name) return type(name) == "string" and name:match("^[%w_]+$") ~= nil end

--- The directories searched for target folders, in order.
---@return string[]
function M.dirs()
  local dirs = { home.path("targets") }
  for d in (os.getenv("MKENGINE_TARGETS") or ""):gmatch("[^:]+") do dirs[#dirs + 1] = d end
  for _, d in ipairs(extra_dirs) do dirs[#dirs + 1] = d end
  return dirs
end

--- Search `dir` for target folders too (after the engine's own).
---@param dir string
function M.add_dir(dir)
  if type(dir) ~= "string" or dir == "" then error("targets.add_dir: dir must be a non-empty string", 2) end
  for _, d in ipairs(extra_dirs) do if d == dir then return end end
  extra_dirs[#extra_dirs + 1] = dir
end

--- The folder of target `name`, or nil.
---@param name string
---@return string|nil
function M.folder(name)
  if not valid_name(name) then return nil end
  for _, d in ipairs(M.dirs()) do
    local f = d .. "/" .. name
    if fs.exists(f .. "/target.lua") then return f end
  end
  return nil
end

--- Names of every discovered target, sorted (the order detection tries
--- foreign task layouts in).
---@return string[]
function M.list()
  local names, seen = {}, {}
  for _, d in ipairs(M.dirs()) do
    for _, name in ipairs(fs.list(d) or {}) do
      if valid_name(name) and not seen[name] and fs.exists(d .. "/" .. name .. "/target.lua") then
        seen[name] = true
        names[#names + 1] = name
      end
    end
  end
  table.sort(names)
  return names
end

-- Run a Lua file of a target folder with the arguments `...`; errors name
-- the file.
local function dofile_of(path, what, ...)
  local ok, v = pcall(folder.run, path, ...)
  if not ok then error("targets: " .. what .. ": " .. tostring(v), 0) end
  return v
end

--- The target module called `name` (loaded once): its target.lua run with
--- the arguments (name, folder). Raises, naming the file, when the target
--- is unknown or its module is broken.
---@param name string
---@return table
function M.get(name)
  if not valid_name(name) then error("targets.get: bad target name " .. tostring(name), 2) end
  if loaded[name] then return loaded[name] end
  local dir = M.folder(name)
  if not dir then
    error("targets.get: unknown target '" .. name .. "' (known: " .. table.concat(M.list(), ", ")
      .. "; searched " .. table.concat(M.dirs(), ", ") .. ")", 2)
  end
  -- run as require runs a module, with its name and where it was found: a
  -- target of several files loads the others with mk.eval.folder.loader(dir)
  local mod = dofile_of(dir .. "/target.lua", "target '" .. name .. "'", name, dir)
  if type(mod) ~= "table" or type(mod.load) ~= "function" then
    error("targets: " .. dir .. "/target.lua must return a table with a load function", 0)
  end
  mod.name = mod.name or name
  mod.dir = dir
  loaded[name] = mod
  return mod
end

-- The value a Lua file of target `name`'s folder returns, run once and
-- checked by check(value, path) (which raises naming the file); a missing
-- file gives `missing()`, or is an error when `missing` is nil.
local function folder_file(name, file, check, missing)
  local mod = M.get(name)
  mod._files = mod._files or {}
  if mod._files[file] ~= nil then return mod._files[file] end
  local path = mod.dir .. "/" .. file
  local v
  if fs.exists(path) then
    v = dofile_of(path, file:gsub("%.lua$", "") .. " of '" .. name .. "'")
    check(v, path)
  elseif missing then
    v = missing()
  else
    error("targets: target '" .. name .. "' has no " .. file .. ": " .. path .. " is missing", 0)
  end
  mod._files[file] = v
  return v
end

local function check_persona(p, path)
  for _, field in ipairs { "target_desc", "lang", "rules", "tune_syntax" } do
    if type(p) ~= "table" or type(p[field]) ~= "string" then
      error("targets: " .. path .. ": field '" .. field .. "' must be a string", 0)
    end
  end
end

local function check_directions(menu, path)
  if type(menu) ~= "table" then error("targets: " .. path .. " must return a list of strings", 0) end
  for i, d in ipairs(menu) do
    if type(d) ~= "string" then error("targets: " .. path .. ": entry " .. i .. " must be a string", 0) end
  end
end

--- What the sub-agents tell a model about target `name`: its persona.lua
--- ({target_desc, lang, rules, tune_syntax}, all strings).
---@param name string
---@return table
function M.persona(name) return folder_file(name, "persona.lua", check_persona) end

--- Facts about the hardware and the task that the target can state for
--- prompts (core count, ISA, caches, device kind, versions, the benchmark
--- and test shapes), as a list of {label, value}; `measured` holds what the
--- engine measured ({device = the baseline's device info}). Empty when the
--- target has no `facts(task, measured)` function.
---@param task table
---@param measured table|nil
---@return table
function M.facts(task, measured)
  local mod = M.get(task.target)
  if type(mod.facts) ~= "function" then return {} end
  return mod.facts(task, measured or {}) or {}
end

--- The direction menu of target `name` (a list of strings; empty when the
--- folder has no directions.lua).
---@param name string
---@return string[]
function M.directions(name)
  return folder_file(name, "directions.lua", check_directions, function() return {} end)
end

--- The folder of target `name`'s own knowledge-base notes, or nil.
---@param name string
---@return string|nil
function M.kb_dir(name)
  local d = M.get(name).dir .. "/kb"
  return fs.isdir(d) and d or nil
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

--- The target name load_task would use for `dir`, or nil. A task.lua may
--- name any target; otherwise every discovered target's detect is asked.
---@param dir string
---@return string|nil
function M.detect(dir)
  if type(dir) ~= "string" then error("targets.detect: dir must be a string", 2) end
  if not fs.isdir(dir) then return nil end
  local t = task_lua_target(dir)
  if t then return t end
  for _, name in ipairs(M.list()) do
    local mod = M.get(name)
    if mod.detect and mod.detect(dir) then return name end
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
  if not M.folder(name) then
    return bad("task " .. dir .. " needs target '" .. name .. "', which is not installed (known: "
      .. table.concat(M.list(), ", ") .. ")")
  end
  return M.get(name).load(abs)
end

return M
