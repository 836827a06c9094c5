-- MaxKernel's multi-configuration tasks through `mkengine eval` and
-- `mkengine suite check` (issue 34): get_inputs returns a list of
-- (dynamic, static) pairs, atol/rtol are lists (tests/python/tasks/
-- multi_config: one row, 256 rows and 7 rows; 1e-4, then 1e-2). Every
-- configuration is frozen and checked with its own tolerance; the result
-- says what passed in each. Real JAX, TPU interpret mode on the CPU.
local t = dofile("tests/lua/lib/t.lua")
local fs = require "mk.fs"
local cjson = require "cjson"
local cpu = dofile("tests/lua/lib/pallas_cpu.lua")

local MK = fs.realpath((os.getenv("MKENGINE_BUILD") or "build") .. "/mkengine")
local TASK = fs.realpath("tests/python/tasks/multi_config")
local KERNEL = "tests/python/candidates/pallas_multi_rmsnorm.py"

local function eval_json(src) return cpu.eval_json(t, TASK, src) end

local function passed(list)
  local out = {}
  for i, c in ipairs(list or {}) do out[i] = string.format("%d:%s", c.configuration, c.ok and "ok" or c.failed) end
  return table.concat(out, " ")
end

t.test("a kernel right in every configuration is correct, and the result says so for each", function()
  local j = eval_json(assert(fs.read(KERNEL)))
  t.eq(j.status, "ok", j.message)
  t.contains(j.message, "all 3 input configurations pass")
  t.eq(passed(j.configurations), "0:ok 1:ok 2:ok")
  t.eq(passed(j.heldout.configurations), "0:ok 1:ok 2:ok")
  t.eq(table.concat(j.heldout.configurations[3].cases, ","), "k2h1001")
  -- timed on every configuration's first case; the figure is their sum, the baseline's too
  local tc = j.timed_configurations
  t.eq(#tc, 3)
  local sum, bsum = 0, 0
  for i, c in ipairs(tc) do
    t.eq(c.configuration, i - 1)
    t.eq(c.case, "k" .. (i - 1) .. "s0")
    t.ok(c.latency_s > 0 and c.baseline_latency_s > 0, "configuration " .. i)
    sum, bsum = sum + c.latency_s, bsum + c.baseline_latency_s
  end
  t.near(j.latency_s, sum, 1e-9 * sum)
  t.near(j.baseline_latency_s, bsum, 1e-9 * bsum)
end)

t.test("a kernel 0.1% off fails the configuration of the tight tolerance and passes the others", function()
  local src = assert(fs.read(KERNEL)):gsub("SCALE = 1%.0\n", "SCALE = 1.001\n")
  local j = eval_json(src)
  t.eq(j.status, "incorrect", j.message)
  t.eq(passed(j.configurations), "0:k0s0 1:ok 2:ok")
  t.matches(j.message, "^configurations: 0 failed %(case k0s0%), 1 passed, 2 passed; case k0s0 %(first call")
end)

t.test("suite check freezes every configuration of the task and its reference passes", function()
  local d = t.tmpdir("mk-configs-suite-")
  assert(fs.mkdirs(d .. "/multi_config"))
  for _, f in ipairs { "reference.py", "kernel_task.yaml" } do
    assert(fs.write(d .. "/multi_config/" .. f, assert(fs.read(TASK .. "/" .. f))))
  end
  local code, out = t.sh("JAX_PLATFORMS=cpu " .. MK .. " suite check " .. d .. " --fresh --json")
  fs.rm_rf(d)
  t.eq(code, 0, out)
  local j = cjson.decode(out:match("^[^\n]+"))
  t.eq(j.status, "ok", j.message)
  t.eq(#j.scale.configurations, 3)
end)

return t.run()
