--- targets/c/test.lua: a build run on the frozen cases of a group (search
--- or held-out) by mkc-run in the sandbox, its outputs compared by mkc-check
--- outside it.
local need, M = ...
local fs = require("mk.fs")
local cjson = require("cjson.safe")
local task_lib = require("mk.services.task")
local set_bytes = need("task").set_bytes
local runner = need "runner"
local suite = need "suite"
local check_outputs = need("check").outputs
local result, nonce, scratch_blob, run_runner = runner.result, runner.nonce, runner.scratch_blob, runner.run
local read_meta, case_list, case_plan = suite.read_meta, suite.case_list, suite.case_plan

--- Run the frozen cases of opts.group ("search" | "heldout") on a build.
function M.test(task, build, tests_dir, opts)
  opts = opts or {}
  if type(build) ~= "table" or build.status ~= "ok" then error("c.test: build must be a successful compile result", 2) end
  local t0 = task_lib.now()
  tests_dir = fs.realpath(tests_dir) or tests_dir
  local meta = read_meta(tests_dir)
  if not meta then return result("error", "tests are not frozen in " .. tests_dir) end
  local group = opts.group or "search"
  local cases = case_list(task, group, meta)
  local by_id, max_bytes = {}, 0
  local n = nonce()
  local sdir, blob, drop = scratch_blob(opts, build, n, "out")
  local plan = { "nonce " .. n, "mode test", "so " .. build.so, "blob " .. blob }
  local acct = { check_s = 0 }
  for _, c in ipairs(cases) do
    by_id[c.id] = c
    max_bytes = math.max(max_bytes, set_bytes(task, c.sizes))
    plan[#plan + 1] = case_plan(task, c, tests_dir, "file", false)
  end
  local st, j = run_runner(task, build, tests_dir, table.concat(plan, "\n") .. "\n", n,
    { timeout = opts.timeout, threads = opts.threads, mem_mb = opts.mem_mb, scratch = sdir, cpu = opts.cpu }, max_bytes * 2)
  if st then drop(); st.correct = false; st.wall_s = task_lib.now() - t0; return st end
  local outs, case_res = {}, {}
  for _, cj in ipairs(j.cases or {}) do
    if cj.canary ~= cjson.null and cj.canary then
      drop()
      return result("incorrect", "case " .. cj.id .. ": the kernel " .. cj.canary
        .. " (out-of-bounds write: check loop bounds on sizes that are not multiples of the vector width)",
        { correct = false, wall_s = task_lib.now() - t0 })
    end
    for _, o in ipairs(cj.outs or {}) do outs[#outs + 1] = o end
  end
  local cr, cerr = check_outputs(task, tests_dir, meta, blob, outs, by_id, acct, opts.cpu)
  drop()
  if not cr then return result("error", cerr, { correct = false }) end
  if not cr.ok then return result("error", "check failed: " .. tostring(cr.error), { correct = false }) end
  local msgs, nbad = {}, 0
  for _, x in ipairs(cr.results) do
    case_res[#case_res + 1] = { id = x.case, name = x.name, ok = x.ok, message = x.message }
    if not x.ok then
      nbad = nbad + 1
      if x.tampered then
        return result("rejected", x.message, { correct = false, cases = case_res })
      end
      if #msgs < 3 then msgs[#msgs + 1] = x.message end
    end
  end
  local wall = task_lib.now() - t0
  if nbad > 0 then
    local m = string.format("%d of %d checked outputs are wrong%s:\n%s", nbad, #cr.results,
      group == "heldout" and " on held-out inputs (seeds never used during search)" or "", table.concat(msgs, "\n"))
    return result("incorrect", m, { correct = false, cases = case_res, wall_s = wall, check_s = acct.check_s })
  end
  return result("ok", "", { correct = true, cases = case_res, wall_s = wall, seccomp = j.seccomp, check_s = acct.check_s })
end
