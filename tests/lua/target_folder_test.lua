-- A target is one folder: the example target of
-- docs/targets/writing-a-target.md (examples/targets/shell) is copied to a
-- temporary directory and evaluates candidates there — through
-- mk.eval (targets.add_dir) and through `mkengine eval`
-- ($MKENGINE_TARGETS) — without any other file knowing about it. Unknown
-- and broken targets are errors that name the file.
local t = dofile("tests/lua/lib/t.lua")
local fs = require "mk.fs"
local proc = require "mk.proc"
local cjson = require "cjson"
local targets = require "mk.eval.targets"
local eval = require "mk.eval"

local MK = fs.realpath((os.getenv("MKENGINE_BUILD") or "build") .. "/mkengine")
local TASK = "examples/tasks/shell/sum"
local GOOD = "s=0\nwhile read -r x; do s=$((s + x)); done\necho \"$s\"\n"

local root = t.tmpdir("mk-target-folder")
local dir = root .. "/targets"
fs.mkdirs(dir)
-- A copy of the example target under `name`, with `file` replaced by `text`
-- when given; returns the path of that file.
local function copy_target(name, file, text)
  local d = dir .. "/" .. name
  local r = assert(proc.run { argv = { "cp", "-r", "examples/targets/shell", d } })
  assert(r.code == 0, r.stderr)
  if file then fs.write(d .. "/" .. file, text) end
  return d .. "/" .. (file or "")
end
copy_target("shell")

t.test("a target folder added with targets.add_dir is listed and loads its persona and directions", function()
  t.eq(targets.folder("shell"), nil, "not known before add_dir")
  targets.add_dir(dir)
  t.eq(targets.folder("shell"), dir .. "/shell")
  local names = table.concat(targets.list(), ",")
  t.contains(names, "shell")
  t.contains(names, "c")
  t.eq(targets.persona("shell").lang, "sh")
  t.eq(#targets.directions("shell"), 2)
  t.eq(targets.detect(TASK), "shell")
end)

t.test("an evaluation runs through the added target: correct, wrong and broken candidates", function()
  targets.add_dir(dir)
  local ev = eval.new(TASK)
  local ok, err = pcall(function()
    local r = ev:evaluate(GOOD)
    t.eq(r.status, "ok", r.message)
    t.eq(r.correct, true)
    t.ok(r.latency_s > 0 and r.baseline_latency_s > 0, "both timed")
    t.contains(r.message, "per call vs baseline")
    t.eq(ev:heldout(GOOD).correct, true)
    local wrong = ev:evaluate("echo 0\n")
    t.eq(wrong.status, "incorrect")
    t.matches(wrong.message, "^case %d+: got '0', want '%d+'")
    local broken = ev:evaluate("if then\n")
    t.eq(broken.status, "compile_error")
    t.contains(broken.message, "kernel.sh")
    local crash = ev:evaluate("exit 3\n")
    t.eq(crash.status, "crash")
    t.contains(crash.message, "exited with status 3")
  end)
  ev:close()
  if not ok then error(err, 0) end
  t.eq(fs.exists(ev.root), false, "the evaluator removed its directory")
end)

t.test("mkengine eval finds the target through MKENGINE_TARGETS", function()
  local cand = root .. "/kernel.sh"
  fs.write(cand, GOOD)
  local r = assert(proc.run { argv = { MK, "eval", TASK, cand, "--json" },
    env = { MKENGINE_TARGETS = "/nonexistent:" .. dir, TMPDIR = root }, timeout = 300 })
  t.eq(r.code, 0, r.stderr)
  local out = cjson.decode(r.stdout)
  t.eq(out.status, "ok", out.message)
  t.eq(out.correct, true)
  t.eq(out.task, "sum")
  t.eq(out.heldout.correct, true)
end)

t.test("without the folder, the task's target is an unknown target named in the error", function()
  local r = assert(proc.run { argv = { MK, "eval", TASK, "/dev/null" }, env = { MKENGINE_TARGETS = false }, timeout = 60 })
  t.eq(r.code, 2)
  t.contains(r.stderr, "needs target 'shell', which is not installed")
  t.raises(function() targets.get("no_such_target") end, "unknown target 'no_such_target'")
end)

t.test("a broken target.lua is an error naming the file", function()
  targets.add_dir(dir)
  local path = copy_target("broken_syntax", "target.lua", "return {\n")
  t.raises(function() targets.get("broken_syntax") end, path)
  path = copy_target("broken_run", "target.lua", "error('boom')\n")
  t.raises(function() targets.get("broken_run") end, path .. ":1: boom")
  path = copy_target("broken_shape", "target.lua", "return 42\n")
  t.raises(function() targets.get("broken_shape") end, path .. " must return a table with a load function")
end)

t.test("a broken or missing persona.lua is an error naming the file", function()
  targets.add_dir(dir)
  local path = copy_target("bad_persona", "persona.lua", "return { lang = 'sh' }\n")
  t.raises(function() targets.persona("bad_persona") end, path .. ": field 'target_desc' must be a string")
  path = copy_target("persona_syntax", "persona.lua", "return {{\n")
  t.raises(function() targets.persona("persona_syntax") end, path)
  path = copy_target("no_persona", "persona.lua", "")
  fs.remove(path)
  t.raises(function() targets.persona("no_persona") end, path .. " is missing")
end)

t.test("a broken directions.lua is an error naming the file, not an empty menu", function()
  targets.add_dir(dir)
  local path = copy_target("bad_directions", "directions.lua", "return { 'ok', 42 }\n")
  t.raises(function() targets.directions("bad_directions") end, path .. ": entry 2 must be a string")
  path = copy_target("directions_syntax", "directions.lua", "return {\n")
  t.raises(function() targets.directions("directions_syntax") end, path)
end)

-- A target split into files: target.lua as a table of contents, a phase that
-- adds its function to the module and a helper file both phases need.
local SPLIT_TARGET = [[
local name, dir = ...
local M = { name = name }
local need = require("mk.eval.folder").loader(dir, M, "handed")
need "loading"
need "compiling"
M.dir_seen = dir
return M
]]

t.test("a target in several files loads its parts once each, with need, the module and what it hands", function()
  targets.add_dir(dir)
  local d = dir .. "/split"
  fs.mkdirs(d)
  fs.write(d .. "/persona.lua", "return {}\n")
  fs.write(d .. "/target.lua", SPLIT_TARGET)
  fs.write(d .. "/helpers.lua", "local _, M = ...\nM.helper_runs = (M.helper_runs or 0) + 1\nreturn { twice = function(x) return 2 * x end }\n")
  fs.write(d .. "/loading.lua", "local need, M, extra = ...\nlocal h = need 'helpers'\n"
    .. "function M.load(dir) return { dir = dir, n = h.twice(21), extra = extra } end\n")
  fs.write(d .. "/compiling.lua", "local need, M = ...\nlocal h = need 'helpers'\n"
    .. "function M.compile() return { status = 'ok', n = h.twice(1) } end\n")
  local mod = targets.get("split")
  t.eq(mod.dir_seen, d, "target.lua got its folder")
  t.eq(mod.load("x").n, 42)
  t.eq(mod.load("x").extra, "handed")
  t.eq(mod.compile().n, 2)
  t.eq(mod.helper_runs, 1, "a file needed twice runs once")
end)

t.test("a broken part of a target is an error naming the part and target.lua", function()
  targets.add_dir(dir)
  local d = dir .. "/split_broken"
  fs.mkdirs(d)
  fs.write(d .. "/target.lua", SPLIT_TARGET)
  fs.write(d .. "/loading.lua", "local _, M = ...\nfunction M.load() end\n")
  fs.write(d .. "/compiling.lua", "\nerror('boom')\n")
  t.raises(function() targets.get("split_broken") end,
    "targets: target 'split_broken': " .. d .. "/target.lua: " .. d .. "/compiling.lua:2: boom")
  local d2 = dir .. "/split_missing"
  fs.mkdirs(d2)
  fs.write(d2 .. "/target.lua", SPLIT_TARGET)
  t.raises(function() targets.get("split_missing") end, d2 .. "/loading.lua")
end)

t.test("mk.eval.folder: a file that needs itself is an error naming it; bad names raise", function()
  local folder = require "mk.eval.folder"
  local d = root .. "/loop"
  fs.mkdirs(d)
  fs.write(d .. "/a.lua", "local need = ...\nreturn need 'b'\n")
  fs.write(d .. "/b.lua", "local need = ...\nreturn need 'a'\n")
  fs.write(d .. "/quiet.lua", "local _ = ...\n")
  local need = folder.loader(d)
  t.raises(function() need "a" end, d .. "/a.lua needs itself")
  t.eq(need "quiet", true, "a file that returns nothing gives true")
  t.raises(function() need "../a" end, "bad file name")
  t.raises(function() folder.loader("") end, "dir must be a non-empty string")
end)

return t.run()
