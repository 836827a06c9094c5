-- The floors of the house (ARCHITECTURE.md): every `require` of the Lua
-- tree points down or sideways, never up. Floors, lowest first:
--   0 engine   the C modules (mk.fs, mk.proc, ...) and cjson
--   1 services lua/mk/services/
--   2 eval     lua/mk/eval.lua, lua/mk/eval/ and the targets (targets/<name>/*.lua)
--   3 search   lua/mk/search/
--   4 agents   lua/agents/
--   5 strategies lua/strategies/
--   6 study    lua/mk/study/, and the run viewer lua/mk/ui/
--   7 cli      lua/mk/cli.lua, lua/mk/cli/
local t = dofile("tests/lua/lib/t.lua")
local fs = require "mk.fs"
local home = require "mk.home"

local NAMES = { "engine", "services", "eval", "search", "agents", "strategies", "study", "cli" }

-- floor of a module name (as given to require)
local function module_floor(name)
  if name == "cjson" or name == "cjson.safe" then return 0 end
  local first, second = name:match("^([%w_]+)%.?([%w_]*)")
  if first == "mk" then
    if second == "services" then return 1 end
    if second == "eval" then return 2 end
    if second == "search" then return 3 end
    if second == "study" or second == "ui" then return 6 end
    if second == "cli" then return 7 end
    return 0 -- mk.fs, mk.proc, ...: C modules
  end
  if first == "agents" then return 4 end
  if first == "strategies" then return 5 end
  return nil
end

-- floor of a file (path relative to the engine home)
local function file_floor(rel)
  if rel:match("^lua/mk/services/") then return 1 end
  if rel == "lua/mk/eval.lua" or rel:match("^lua/mk/eval/") or rel:match("^targets/") then return 2 end
  if rel:match("^lua/mk/search/") then return 3 end
  if rel:match("^lua/agents/") then return 4 end
  if rel:match("^lua/strategies/") then return 5 end
  if rel:match("^lua/mk/study/") or rel:match("^lua/mk/ui/") then return 6 end
  if rel == "lua/mk/cli.lua" or rel:match("^lua/mk/cli/") then return 7 end
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
  t.eq(module_floor("mk.search.runner"), 3)
  t.eq(module_floor("mk.eval"), 2)
  t.eq(module_floor("mk.eval.pool"), 2)
  t.eq(file_floor("lua/mk/eval.lua"), 2)
  t.eq(file_floor("lua/mk/eval/worker.lua"), 2)
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
    t.ok(floor ~= nil, rel .. " is on no floor: put it in one of lua/mk/{services,eval,search,study,cli}, "
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

-- A loop of requires is held apart only by requiring inside functions (a
-- require at the top of both files would fail); the floors stay a tree when
-- no module reaches itself again through the modules it requires, wherever
-- in the file the require stands.
-- module name of a file of lua/ (lua/agents/init.lua is `agents`)
local function module_of(rel)
  local m = rel:match("^lua/(.*)%.lua$")
  return m and (m:gsub("/init$", ""):gsub("/", "."))
end

-- the first loop of requires among `sources` (file -> text), as
-- "a -> b -> a", or nil
local function require_loop(sources)
  local by_module, files = {}, {}
  for rel in pairs(sources) do
    files[#files + 1] = rel
    if module_of(rel) then by_module[module_of(rel)] = rel end
  end
  table.sort(files)
  local state, stack = {}, {}
  local function visit(f)
    if state[f] == "done" then return nil end
    if state[f] == "open" then
      local i = #stack
      while stack[i] ~= f do i = i - 1 end
      return table.concat(stack, " -> ", i) .. " -> " .. f
    end
    state[f] = "open"
    stack[#stack + 1] = f
    for _, name in ipairs(requires(sources[f])) do
      local g = by_module[name]
      local loop = g and g ~= f and visit(g)
      if loop then return loop end
    end
    stack[#stack] = nil
    state[f] = "done"
    return nil
  end
  for _, rel in ipairs(files) do
    local loop = visit(rel)
    if loop then return loop end
  end
  return nil
end

t.test("the loop finder sees a loop held apart by a lazy require", function()
  t.eq(module_of("lua/agents/init.lua"), "agents")
  t.eq(module_of("lua/mk/study/report.lua"), "mk.study.report")
  local src = {
    ["lua/mk/study/a.lua"] = 'local b = require "mk.study.b"\n',
    ["lua/mk/study/b.lua"] = 'local function f() return require("mk.study.c").x end\n',
    ["lua/mk/study/c.lua"] = 'local fs = require "mk.fs"\n',
  }
  t.eq(require_loop(src), nil)
  src["lua/mk/study/c.lua"] = 'local function g() return require("mk.study.a") end\n'
  t.eq(require_loop(src), "lua/mk/study/a.lua -> lua/mk/study/b.lua -> lua/mk/study/c.lua -> lua/mk/study/a.lua")
end)

t.test("no module requires itself through others", function()
  local files = {}
  lua_files(home.path("lua"), "/lua", files)
  lua_files(home.path("targets"), "/targets", files)
  local sources = {}
  for _, rel in ipairs(files) do sources[rel] = assert(fs.read(home.path(rel))) end
  t.eq(require_loop(sources), nil, "a loop of requires")
end)

return t.run()
