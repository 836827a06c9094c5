-- `mkengine suite check DIR` (lua/mk/cli/suite.lua) on real JAX: a
-- directory of the project's own Pallas tasks, one whose reference passes
-- at a chosen test scale and one no scale makes testable; the time limit;
-- usage errors.
local t = dofile("tests/lua/lib/t.lua")
local fs = require "mk.fs"

local MK = fs.realpath((os.getenv("MKENGINE_BUILD") or "build") .. "/mkengine")
local TASKS = fs.realpath("tests/python/tasks")

local function bench_dir(names)
  local d = t.tmpdir("mk-suite-check-")
  for _, n in ipairs(names) do
    assert(fs.mkdirs(d .. "/" .. n))
    assert(fs.write(d .. "/" .. n .. "/baseline.py", assert(fs.read(TASKS .. "/" .. n .. "/baseline.py"))))
  end
  return d
end

t.test("usage and input errors exit 2 with one line", function()
  local code, out = t.sh(MK .. " suite")
  t.eq(code, 2)
  t.ok(out:find("expected a subcommand", 1, true), out)
  code, out = t.sh(MK .. " suite check /nonexistent/dir")
  t.eq(code, 2)
  t.ok(out:find("not a directory: /nonexistent/dir", 1, true), out)
  local empty = t.tmpdir("mk-suite-empty-")
  code, out = t.sh(MK .. " suite check " .. empty)
  t.eq(code, 2)
  t.ok(out:find("no task directories", 1, true), out)
  code = t.sh(MK .. " suite check " .. empty .. " --time-limit 0")
  t.eq(code, 2)
  fs.rm_rf(empty)
end)

t.test("one line per task with status, scale, seconds and peak memory, then a total", function()
  local d = bench_dir { "scale_groups", "scale_constant" }
  local code, out = t.sh(MK .. " suite check " .. d .. " --fresh --time-limit 280")
  t.eq(code, 1, "one reference could not be checked: " .. out)
  local lines = {}
  for l in out:gmatch("[^\n]+") do lines[#lines + 1] = l end
  t.eq(#lines, 3, out)
  -- sorted by name: scale_constant, scale_groups
  t.ok(lines[1]:match("^scale_constant%s+error%s+%-%s+%d+%.%d%s+%d+%s+.*cannot be frozen at any test scale"), lines[1])
  t.ok(lines[2]:match("^scale_groups%s+ok%s+1/16%s+%d+%.%d%s+%d+%s*$"), lines[2])
  local peak = tonumber(lines[2]:match("(%d+)%s*$"))
  t.ok(peak > 50 and peak < 4096, "the peak of a JAX process, under the limit: " .. tostring(peak))
  t.ok(lines[3]:match("^total: 1/2 ok, 1 error; %d+ s; largest peak %d+ MB$"), lines[3])
  fs.rm_rf(d)
end)

t.test("a task past the time limit is reported as limit and the next task still runs", function()
  local d = bench_dir { "scale_mask" }
  local code, out = t.sh(MK .. " suite check " .. d .. " --fresh --time-limit 1 --json")
  t.eq(code, 1, out)
  local first = out:match("^[^\n]+")
  local j = require("cjson").decode(first)
  t.eq(j.task, "scale_mask")
  t.eq(j.status, "limit")
  t.ok(j.message:find("time limit of 1s", 1, true), j.message)
  t.ok(j.seconds < 30, "cancelled, not waited out: " .. tostring(j.seconds))
  t.ok(out:find('"total":1', 1, true), out)
  fs.rm_rf(d)
end)

t.test("an ok whose freeze warned shows the warning", function()
  local d = bench_dir { "scale_noise" }
  local code, out = t.sh(MK .. " suite check " .. d .. " --fresh --time-limit 280")
  t.eq(code, 0, out)
  t.ok(out:match("^scale_noise%s+ok%s+own%s+%d+%.%d%s+%d+%s+warning: the reference's output is constant at any "
    .. "test scale tried"), out)
  code, out = t.sh(MK .. " suite check " .. d .. " --fresh --time-limit 280 --json")
  t.eq(code, 0, out)
  local j = require("cjson").decode(out:match("^[^\n]+"))
  t.eq(#j.warnings, 1, out)
  fs.rm_rf(d)
end)

t.run()
