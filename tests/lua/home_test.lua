-- mk.home: an engine finds its own helper programs (mk-exec, the C target's
-- runner and checker) beside its executable, whatever its build directory
-- is called. The built binaries are copied (nothing is built) into a
-- directory named unlike ./build, and the copy runs with none of
-- MKENGINE_BUILD, MKC_BIN_DIR or MKENGINE_EXEC set.
local t = dofile("tests/lua/lib/t.lua")
local fs = require "mk.fs"
local proc = require "mk.proc"
local cjson = require "cjson"
local home = require "mk.home"

local BUILD = fs.realpath(os.getenv("MKENGINE_BUILD") or "build")
local HELPERS = { "mkengine", "engine/exec/mk-exec", "targets/c/mkc-run", "targets/c/mkc-check" }

-- A copy of the engine and its helpers in <tmp>/out-elsewhere, laid out as
-- in a build tree.
local function copy_build()
  local dir = fs.realpath(t.tmpdir("home-test")) .. "/out-elsewhere"
  for _, rel in ipairs(HELPERS) do
    fs.mkdirs((dir .. "/" .. rel):match("^(.*)/[^/]*$"))
    local r = assert(proc.run { argv = { "cp", "-p", BUILD .. "/" .. rel, dir .. "/" .. rel } })
    t.eq(r.code, 0, r.stderr)
  end
  return dir
end

local NO_OVERRIDES = { MKENGINE_BUILD = false, MKC_BIN_DIR = false, MKENGINE_EXEC = false }

local function run_copy(dir, args, env)
  local argv = { dir .. "/mkengine" }
  for _, a in ipairs(args) do argv[#argv + 1] = a end
  local e = {}
  for k, v in pairs(NO_OVERRIDES) do e[k] = v end
  for k, v in pairs(env or {}) do e[k] = v end
  return assert(proc.run { argv = argv, env = e, timeout = 300 })
end

-- An engine home with no build/ in it (the source tree has one, which the
-- engine once fell back to): lua/, kb/ and targets/ copied.
local function home_without_build(dir)
  local h = dir .. "/../home"
  fs.mkdirs(h)
  for _, sub in ipairs { "lua", "kb", "targets" } do
    local r = assert(proc.run { argv = { "cp", "-r", home.path(sub), h .. "/" .. sub } })
    t.eq(r.code, 0, r.stderr)
  end
  return h
end

t.test("home/helper finds a program beside the running engine, or returns nil", function()
  t.eq(home.exe_dir, BUILD)
  t.eq(home.helper("engine/exec/mk-exec"), BUILD .. "/engine/exec/mk-exec")
  t.eq(home.helper(nil, "libexec/mkengine/mk-exec"), nil, "not installed")
  t.eq(home.helper("no/such/helper", "no/such/helper"), nil)
  t.eq(home.helper("engine/exec", nil), nil, "a directory is not a program")
end)

t.test("home/an engine copied to another build dir uses its own mk-exec and C harness", function()
  local dir = copy_build()
  local script = dir .. "/probe.lua"
  fs.write(script, [[
local home = require "mk.home"
local r = require("mk.proc").run { argv = { "sh", "-c", "readlink /proc/$PPID/exe" } }
local bins = require("mk.eval.targets").get("c").binaries()
print(require("cjson").encode { exe_dir = home.exe_dir, exec = r.stdout:gsub("%s+$", ""), run = bins.run,
  check = bins.check, helper = home.helper("engine/exec/mk-exec", "libexec/mkengine/mk-exec") })
]])
  local r = run_copy(dir, { "script", script })
  t.eq(r.code, 0, r.stderr)
  local j = cjson.decode(r.stdout)
  t.eq(j.exe_dir, dir)
  t.eq(j.helper, dir .. "/engine/exec/mk-exec")
  t.eq(j.exec, dir .. "/engine/exec/mk-exec", "the wrapper in front of a child")
  t.eq(j.run, dir .. "/targets/c/mkc-run")
  t.eq(j.check, dir .. "/targets/c/mkc-check")
end)

t.test("home/mkengine eval works from a build dir that is not ./build", function()
  local dir = copy_build()
  local task = dir .. "/../rms"
  fs.mkdirs(task)
  local src = fs.read("examples/tasks/c/rmsnorm/task.lua")
  fs.write(task .. "/task.lua", (src:gsub("sizes = { rows = 4096, cols = 4096 }", "sizes = { rows = 64, cols = 96 }")))
  fs.write(task .. "/reference.c", fs.read("examples/tasks/c/rmsnorm/reference.c"))
  local r = run_copy(dir, { "eval", task, "examples/tasks/c/rmsnorm/reference.c", "--json", "--threads", "1",
    "--min-time", "0.02", "--timeout", "60" }, { MKENGINE_HOME = home_without_build(dir) })
  t.eq(r.code, 0, r.stderr)
  local j = cjson.decode(r.stdout)
  t.eq(j.status, "ok", j.message)
  t.eq(j.correct, true)
  t.ok(j.latency_s > 0, "measured")
end)

return t.run()
