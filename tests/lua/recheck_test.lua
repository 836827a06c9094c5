-- Re-checks on a device worker (issue 21): a kernel this machine could not
-- check (status "unchecked", e.g. a Pallas kernel made for sizes its CPU
-- cannot reach) is evaluated again on a workers-file entry marked
-- `recheck = true`, a real `mkengine worker` process. The target is the
-- shell example target with one test double in front of its test step:
-- without $MK_TEST_DEVICE (this process) every candidate is "unchecked";
-- with it (the worker's env) the real test runs. Everything else (freeze,
-- the baseline) stays on this machine when the file names only recheck
-- workers.
local t = dofile("tests/lua/lib/t.lua")
local fs = require "mk.fs"
local proc = require "mk.proc"
local targets = require "mk.eval.targets"
local pool_lib = require "mk.eval.pool"
local eval = require "mk.eval"

local MK = fs.realpath((os.getenv("MKENGINE_BUILD") or "build") .. "/mkengine")
local TASK = "examples/tasks/shell/sum"
local GOOD = "s=0\nwhile read -r x; do s=$((s + x)); done\necho \"$s\"\n"
local WRONG = "echo 0\n"

local tmp = fs.realpath(assert(fs.tmpdir("mk-recheck"))) -- kept across tests (t.tmpdir dirs go after each), removed at the end
local tdir = tmp .. "/targets"
fs.mkdirs(tdir)
do
  local r = assert(proc.run { argv = { "cp", "-r", "examples/targets/shell", tdir .. "/shell" } })
  assert(r.code == 0, r.stderr)
  local path = tdir .. "/shell/target.lua"
  local src = assert(fs.read(path))
  local double = [[
-- test double (tests/lua/recheck_test.lua): a machine without the device
-- cannot check any candidate
local real_test = M.test
function M.test(task, build, tests_dir, opts)
  if os.getenv("MK_TEST_DEVICE") ~= "1" then
    return { status = "unchecked", correct = false, reason = "scale",
      message = "not checked on this machine (test double: no device here)" }
  end
  return real_test(task, build, tests_dir, opts)
end
return M
]]
  src = src:gsub("\nreturn M%s*$", "\n" .. double)
  assert(src:find("test double", 1, true), "target.lua ends with return M")
  fs.write(path, src)
end
targets.add_dir(tdir)
assert(os.getenv("MK_TEST_DEVICE") == nil, "run this test without MK_TEST_DEVICE")

local function workers_file(name, body)
  local path = tmp .. "/" .. name .. ".lua"
  fs.write(path, "return " .. body .. "\n")
  return path
end

local function recheck_worker(name, command)
  return string.format("{ kind = 'local', name = %q, recheck = true, command = %q, cache = %q, "
    .. "env = { MKENGINE_TARGETS = %q, MK_TEST_DEVICE = '1' } }", name, command or MK, tmp .. "/cache-" .. name, tdir)
end

t.test("without a recheck worker an unchecked kernel stays unchecked", function()
  local ev = eval.new(TASK)
  local r = ev:evaluate(GOOD)
  ev:close()
  t.eq(r.status, "unchecked")
  t.eq(r.correct, false)
  t.contains(r.message, "not checked on this machine")
end)

t.test("a recheck worker gives the verdict: correct is correct, wrong is incorrect, held-out there too", function()
  local pool = pool_lib.open(workers_file("device", "{ " .. recheck_worker("dev1") .. " }"))
  local ok, err = pcall(function()
    local ev = eval.new(TASK, { pool = pool })
    t.eq(ev.pool, nil, "no eval worker: evaluations start on this machine")
    t.ok(ev.recheck_pool == pool, "the recheck workers take what is unchecked here")
    local r = ev:evaluate(GOOD)
    t.eq(r.status, "ok", r.message)
    t.eq(r.correct, true)
    t.eq(r.worker, "dev1")
    t.contains(r.message, "re-checked on worker dev1")
    t.contains(r.recheck_of, "not checked on this machine")
    t.ok(r.latency_s > 0, "timed on the worker")
    t.ok(fs.exists(ev.tests_dir .. "/frozen"), "the suite was frozen here, not only on the worker")
    local again = ev:evaluate(GOOD)
    t.ok(again == r, "the re-checked verdict is kept: no second request")
    local h = ev:heldout(GOOD)
    t.eq(h.correct, true, "held-out check of a re-checked kernel runs on the recheck worker")
    local w = ev:evaluate(WRONG)
    t.eq(w.status, "incorrect", w.message)
    t.eq(w.correct, false)
    t.eq(w.worker, "dev1")
    ev:close()
  end)
  pool:release()
  if not ok then error(err, 0) end
end)

t.test("when the recheck worker cannot start, the first verdict stands and says why", function()
  local pool = pool_lib.open(workers_file("broken", "{ " .. recheck_worker("gone", tmp .. "/no-such-mkengine") .. " }"),
    { restarts = 0 })
  local ok, err = pcall(function()
    local ev = eval.new(TASK, { pool = pool })
    local r = ev:evaluate(GOOD)
    t.eq(r.status, "unchecked")
    t.contains(r.message, "not checked on this machine")
    t.contains(r.message, "no re-check on a device worker")
    local said = r.message
    local again = ev:evaluate(GOOD)
    t.eq(again.message, said, "asked again, the reason is said once (the cached verdict is not grown)")
    t.eq(r.message, said)
    ev:close()
  end)
  pool:release()
  if not ok then error(err, 0) end
end)

t.test("a workers file with a recheck that is not a boolean is an input error", function()
  local ok, e = pcall(pool_lib.load, workers_file("bad", "{ { kind = 'local', recheck = 'yes' } }"))
  t.eq(ok, false)
  t.eq(e.exit, 2)
  t.contains(e.message, "recheck must be true or false")
end)

local rc = t.run()
fs.rm_rf(tmp)
return rc
