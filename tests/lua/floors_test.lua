-- The floors of the house (ARCHITECTURE.md): every `require` of the Lua
-- tree points down or sideways, never up. Floors, lowest first:
--   0 engine   the C modules (mk.fs, mk.proc, ...) and cjson
--   1 services lua/mk/services/
--   2 search   lua/mk/search/ and the targets (targets/<name>/*.lua)
--   3 agents   lua/agents/
--   4 strategies lua/strategies/
--   5 study    lua/mk/study/, and the run viewer lua/mk/ui/
--   6 cli      lua/mk/cli.lua, lua/mk/cli/
local t = dofile("tests/lua/lib/t.lua")
local fs = require "mk.fs"
local home = require "mk.home"

local NAMES = { "engine", "services", "search", "agents", "strategies", "study", "cli" }

-- floor of a module name (as given to require)
local function module_floor(name)
  if name == "cjson" or name == "cjson.safe" then return 0 end
  local first, second = name:match("^([%w_]+)%.?([%w_]*)")
  if first == "mk" then
    if second == "services" then return 1 end
    if second == "search" then return 2 end
    if second == "study" or second == "ui" then return 5 end
    if second == "cli" then return 6 end
    return 0 -- mk.fs, mk.proc, ...: C modules
  end
  if first == "agents" then return 3 end
  if first == "strategies" then return 4 end
  return nil
end

-- floor of a file (path relative to the engine home)
local function file_floor(rel)
  if rel:match("^lua/mk/services/") then return 1 end
  if rel:match("^lua/mk/search/") or rel:match("^targets/") then return 2 end
  if rel:match("^lua/agents/") then return 3 end
  if rel:match("^lua/strategies/") then return 4 end
  if rel:match("^lua/mk/study/") or rel:match("^lua/mk/ui/") then return 5 end
  if rel == "lua/mk/cli.lua" or rel:match("^lua/mk/cli/") then return 6 end
  return nil
end

local function lua_files(dir, rel, out)
  for _, name in ipairs(fs.list(dir) or {}) do
    local p, r = dir .. "/" .. name, rel .. "/" .. name
    if fs.isdir(p) then lua_files(p, r, out)
    elseif name:match("%.lua$") then out[#out + 1] = r:sub(2) end
  end
  return out
end

-- literal requires of a source text: require "x", require("x"), require 'x',
-- pcall(require, "x"); comments are left out, a dynamic name ("mk.cli." ..
-- n) is not a module name
local function requires(src)
  local out = {}
  src = src:gsub("%-%-[^\n]*", "")
  for _, name in src:gmatch("require%s*%(?%s*([\"'])([%w_.]+)%1") do out[#out + 1] = name end
  for _, name in src:gmatch("pcall%(%s*require%s*,%s*([\"'])([%w_.]+)%1") do out[#out + 1] = name end
  return out
end

t.test("the requires parser sees every form", function()
  local got = requires('local a = require "mk.fs"\nlocal b = require("agents.plan")\n'
    .. "local c = require 'mk.search.graph'\nlocal ok, d = pcall(require, \"mk.study.bench\")\n"
    .. "-- require \"mk.cli\" in a comment\n")
  t.same(got, { "mk.fs", "agents.plan", "mk.search.graph", "mk.study.bench" })
  t.eq(module_floor("mk.search.runner"), 2)
  t.eq(file_floor("lua/mk/services/llm/providers/openai.lua"), 1)
end)

t.test("no module requires one of a higher floor", function()
  local files = {}
  lua_files(home.path("lua"), "/lua", files)
  lua_files(home.path("targets"), "/targets", files)
  t.ok(#files > 40, "found the Lua tree (" .. #files .. " files)")
  local bad = {}
  for _, rel in ipairs(files) do
    local floor = file_floor(rel)
    t.ok(floor ~= nil, rel .. " is on no floor: put it in one of lua/mk/{services,search,study,cli}, "
      .. "lua/agents, lua/strategies or targets/")
    local src = assert(fs.read(home.path(rel)))
    for _, name in ipairs(requires(src)) do
      local mf = module_floor(name)
      if mf and floor and mf > floor then
        bad[#bad + 1] = string.format("%s (%s) requires %s (%s)", rel, NAMES[floor + 1], name, NAMES[mf + 1])
      end
    end
  end
  t.eq(table.concat(bad, "\n"), "", "upward requires")
end)

t.test("every mk.* module named in a require exists", function()
  local files = {}
  lua_files(home.path("lua"), "/lua", files)
  lua_files(home.path("targets"), "/targets", files)
  local C = {} -- the C modules: every `int luaopen_mk_<name>(lua_State` in engine/*.c
  for _, f in ipairs(fs.list(home.path("engine"))) do
    for name in (f:match("%.c$") and fs.read(home.path("engine/" .. f)) or ""):gmatch("\nint luaopen_mk_([%w_]+)%(lua_State") do
      C["mk." .. name] = true
    end
  end
  t.ok(C["mk.fs"] and C["mk.hash"] and C["mk.sched"], "found the C modules")
  for _, rel in ipairs(files) do
    for _, name in ipairs(requires(assert(fs.read(home.path(rel))))) do
      if name:match("^mk%.") and not name:match("%.$") and not C[name] then
        t.ok(package.searchpath(name, package.path), rel .. " requires " .. name .. ", which does not exist")
      end
    end
  end
end)

return t.run()
