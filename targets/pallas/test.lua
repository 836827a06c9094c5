--- targets/pallas/test.lua: a build run on the frozen cases of a group in
--- one process (the harness's `run` step) and checked in another that
--- never loads candidate code (`check`), escalated to larger scales while
--- it answers "rescale", its held-out pass confirmed at larger scales
--- (confirm.lua), and a run out of time in interpret mode judged by the
--- outputs its calls left.
local need, M, call = ...
local fs = require "mk.fs"
local args = need "args"
local read_json = need("escalate").read_json
local harness, device_harness = call.harness, call.device
local task_args, candidate_args, sandbox_for, visible_inputs = args.task, args.candidate, args.sandbox,
  args.visible_inputs

-- The verdict on a run in interpret mode that ran out of time (`r`), from
-- the check of the outputs its calls left (`c`, check --present-only): a
-- wrong output is `incorrect` whatever the rest would have been; calls
-- that were all correct make it `unchecked` (the interpreter is too slow
-- on this CPU for the kernel's DMAs and steps: 7p's ragged paged attention
-- copies ~8,700 pages a call), re-checked on a device worker when the run
-- has one. When no call ended, the run's progress file (harness
-- ProgressFile: grid steps and DMAs the interpreter simulated) says
-- whether it was still simulating the kernel when it was stopped (counts
-- that moved within M.defaults.stalled_after s): `unchecked` again; else
-- `timeout` (a hang: a semaphore never signalled, a loop without steps).
M.defaults.stalled_after = 30

local function out_of_time(r, c, limit, outputs)
  local done, total = math.tointeger(c.checked_calls) or 0, math.tointeger(c.calls) or 0
  if c.status == "incorrect" then
    c.checked = true
    c.message = string.format("%s (found in the %d call%s that ended before the run ran past its %g s limit)",
      tostring(c.message), done, done == 1 and "" or "s", limit)
    return c
  end
  if c.status ~= "ok" then return r end
  if done == 0 then
    local p = read_json(outputs .. "/progress.json")
    if type(p.wall) ~= "number" or os.time() - p.wall > M.defaults.stalled_after then return r end
    return { status = "unchecked", correct = false, reason = "time", message = string.format(
      "not checked on this machine: in interpret mode no call ended within the %g s limit, but the interpreter " ..
      "was still simulating it when stopped (%d grid steps and %d DMAs, in case %s, %s call); re-checked on a " ..
      "device worker when the run has one", limit, math.tointeger(p.steps) or 0, math.tointeger(p.dmas) or 0,
      tostring(p.case), tostring(p.call)) }
  end
  local secs = {}
  for _, s in ipairs(c.call_s or {}) do secs[#secs + 1] = string.format("%.0f", s) end
  return { status = "unchecked", correct = false, reason = "time", message = string.format(
    "not checked on this machine: in interpret mode its run ran past the %g s limit after %d of %d calls, " ..
    "each correct (%s s a call); re-checked on a device worker when the run has one", limit, done, total,
    #secs > 0 and table.concat(secs, ", ") or "?") }
end

-- What passed per input configuration of a multi-configuration task
-- (harness check's `configurations`): {{configuration, ok, cases, failed,
-- message}}, or nil.
local function configurations(list)
  if type(list) ~= "table" or #list == 0 then return nil end
  local out = {}
  for i, c in ipairs(list) do
    out[i] = { configuration = math.tointeger(c.configuration) or c.configuration, ok = c.ok == true,
      cases = c.cases, failed = type(c.failed) == "string" and c.failed or nil,
      message = type(c.message) == "string" and c.message ~= "" and c.message or nil }
  end
  return out
end

-- The result of a test whose check ran (`c`), confirmed or not at larger scales.
local function checked_result(c, build, confirmed, wall, check_s)
  local cases = {}
  for i, x in ipairs(c.cases or {}) do
    cases[i] = { id = x.case, call = x.call, ok = x.ok, message = x.message, reason = x.reason,
      max_abs_err = x.max_abs_err }
  end
  if confirmed then c.message = (c.message or "") ~= "" and (c.message .. "; " .. confirmed.text) or confirmed.text end
  return {
    confirmed_at = confirmed and confirmed.label or nil, confirm_note = confirmed and confirmed.text or nil,
    status = c.status, correct = c.status == "ok", reason = c.reason, cases = cases,
    message = (c.status ~= "ok" and build.scale_note) and (build.scale_note .. ": " .. tostring(c.message)) or c.message,
    wall_s = wall, check_s = check_s, kind = c.kind,
    configurations = configurations(c.configurations), -- a multi-configuration task: what passed in each
    -- its error against the reference's own (a case with the reference in float32), and a warning far beyond it
    error_ratio = tonumber(c.error_ratio), warning = type(c.warning) == "string" and c.warning or nil,
    checked_at = build.checked_at, scale_note = build.scale_note, -- escalated: the scale it was checked at
  }
end

-- The result of a build checked only at the task's own sizes by a sampled
-- run (sampled.lua): its verdict for both groups (the case is a held-out
-- seed at those sizes); `s`: a failing verdict instead.
local function sampled_result(ok, build, s)
  if s and s.status ~= "ok" then
    return { status = s.status, correct = false, reason = s.reason, kind = s.kind, phase = s.phase, cases = {},
      message = s.message, checked_at = s.checked_at, wall_s = s.wall_s or 0, check_s = s.check_s or 0 }
  end
  build.checked_at, build.scale_note = ok.checked_at or build.checked_at, ok.scale_note or build.scale_note
  return { status = "ok", correct = true, cases = {}, message = build.scale_note, checked_at = build.checked_at,
    scale_note = build.scale_note, wall_s = 0, check_s = 0 }
end

-- The held-out confirmation of a build whose cases passed on `used`
-- (confirm.lua): at larger scales than the test scale's, then the task's
-- own sizes sampled; for a build escalated to a larger scale already, the
-- sampled run alone. nil when there is nothing larger to check.
local function confirmation(task, build, tests_dir, used, step, last, lim, opts)
  local function sampled(limit_s) return M.sampled(task, build, build.base_tests or tests_dir, opts, limit_s) end
  if used == tests_dir then return M.confirm(task, tests_dir, step, last, lim, sampled) end
  return M.confirm_sampled({ at = build.checked_at, text = "" }, sampled)
end

--- Run the frozen cases of opts.group ("search" or "heldout") in one
--- process and check them in another that never loads candidate code.
---@param task table
---@param build table from compile
---@param tests_dir string
---@param opts? {group?: string, timeout?: number, interpret?: boolean, sandbox?: boolean, mem_mb?: number}
---@return table {status, correct, message, cases, wall_s}
function M.test(task, build, tests_dir, opts)
  opts = opts or {}
  if build.status ~= "ok" then
    return { status = build.status, correct = false, message = build.message, cases = {}, wall_s = 0 }
  end
  if build.sampled then return sampled_result(build.sampled, build) end
  local group = opts.group or "search"
  local outputs = build.workdir .. "/outputs-" .. group
  local wall, check_s, last_run = 0, 0, {}
  -- run in one process, check in another; "rescale" when a scaled case whose
  -- blocks exceed its arrays fails the check (M.escalate re-tests it)
  local function step(dir, limit)
    fs.rm_rf(outputs)
    fs.mkdirs(outputs)
    local extra = { "--tests", dir, "--outputs", outputs }
    if group == "heldout" then extra[#extra + 1] = "--heldout-cases" end
    limit = limit or opts.timeout or task.timeout
    local r = device_harness("run", candidate_args(task, build, extra, opts), {
      timeout = limit, cwd = build.workdir, cpu = opts.cpu, build = build, mem_mb = opts.mem_mb,
      sandbox = sandbox_for(task, build.workdir, opts, visible_inputs(dir)),
    })
    wall, last_run = wall + (r.wall_s or 0), r
    local function check(present_only)
      local cargs = task_args(task, { "--tests", dir, "--outputs", outputs })
      if group == "heldout" then cargs[#cargs + 1] = "--heldout-cases" end
      if present_only then cargs[#cargs + 1] = "--present-only" end
      local c = harness("check", cargs, { timeout = M.defaults.check_timeout, pool = "light", cpu = opts.cpu,
        build = build, mem_mb = opts.mem_mb })
      check_s = check_s + (c.wall_s or 0)
      return c
    end
    if r.status == "timeout" and build.timing_kind == "interpret" then
      return out_of_time(r, check(true), limit or M.defaults.timeout, outputs)
    end
    if r.status ~= "ok" then return r end
    local c = check(false)
    local failed
    for _, x in ipairs(c.cases or {}) do
      if x.ok == false then failed = failed or x.case end
    end
    local hint = c.status ~= "ok" and c.status ~= "error" and failed and type(r.rescale_cases) == "table"
      and r.rescale_cases[failed]
    if hint then -- the first failing case is test-scaled and its blocks exceed its arrays
      return { status = "rescale", reason = "case " .. failed .. ": " .. hint .. ", and the check failed: " ..
        tostring(c.message) }
    end
    c.checked = true
    return c
  end
  -- a build compiled at a larger scale (M.escalate) is tested there too
  local lim = { mem_mb = opts.mem_mb or build.mem_mb, cpu = opts.cpu } -- of the freezes at larger scales
  local c, used = M.escalate(task, build.scaled_tests or tests_dir, step, build.base_tests or tests_dir, lim)
  if c.status == "unchecked" then -- no scale this CPU can test: the task's own sizes, sampled
    local s = M.sampled_instead(task, build, build.base_tests or tests_dir, c, opts)
    if s ~= c then
      if s.status == "ok" then build.scaled_tests, build.base_tests = nil, nil end
      return sampled_result(build.sampled or s, build, s)
    end
  end
  if used ~= (build.scaled_tests or tests_dir) then build.scaled_tests, build.base_tests = used, tests_dir end
  build.scale_note, build.checked_at = c.scale_note or build.scale_note, c.checked_at or build.checked_at
  if not c.checked then -- a run-time verdict (out of bounds, race, crash) names the scale it was reached at too
    local note = c.status ~= "unchecked" and c.status ~= "rescale" and build.scale_note
    return { status = c.status, correct = false, message = note and (note .. ": " .. tostring(c.message)) or c.message,
      cases = {}, wall_s = wall + check_s, check_s = check_s, kind = c.kind, phase = c.phase, reason = c.reason,
      checked_at = note and build.checked_at or nil }
  end
  local confirmed = group == "heldout" and c.status == "ok" and opts.confirm ~= false
    and build.timing_kind == "interpret"
    and confirmation(task, build, tests_dir, used, step, function() return last_run end, lim, opts) or nil
  local v = confirmed and confirmed.verdict
  if v then
    return { status = v.status, correct = false, reason = v.reason, cases = {}, message = v.message,
      wall_s = wall + check_s, check_s = check_s, kind = v.kind, phase = v.phase, checked_at = v.checked_at }
  end
  return checked_result(c, build, confirmed, wall + check_s, check_s)
end
