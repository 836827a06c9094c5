--- targets/pallas/sampled.lua: a kernel checked at the task's own sizes on
--- a CPU by a sampled run (harness sampling.py, own_sizes.py): its suite
--- frozen once at those sizes (the reference run natively, its expected
--- outputs kept, its inputs made again from the seed), the candidate's
--- pallas_call run in TPU interpret mode with its body executed only at a
--- sample of its parallel grid points, the output blocks those alone write
--- compared by a process that runs no candidate code. Used where the scales
--- a CPU can test end without a verdict (escalate.lua's "unchecked" for
--- scale reasons) and as the last step of a held-out confirmation.
local need, M, call = ...
local fs = require "mk.fs"
local args = need "args"
local scaled_suite = need("escalate").scaled_suite
local harness, device_harness = call.harness, call.device
local task_args, candidate_args, sandbox_for, visible_inputs = args.task, args.candidate, args.sandbox,
  args.visible_inputs

M.defaults.sampled = true -- check at the task's own sizes by a sampled run (interpret mode)
M.defaults.sampled_freeze_s = 420 -- s to freeze the reference at the task's own sizes (once per task)
M.defaults.sampled_s = 300 -- s the candidate's sampled run may take (its compile included)
M.defaults.sample_seed = 0 -- seed of the random grid points sampled (corners are always)
-- s the whole sampled check of one build may take, the freeze (when the cache lacks it) and the run together:
-- with the test scale's checks and the confirmation before it, an evaluation ends within 10 minutes
M.defaults.sampled_total_s = 420
M.defaults.sampled_min_s = 30 -- s below which no sampled run is started (its compile alone takes longer)
M.defaults.sampled_plan_s = 60 -- s to plan the sampled call from the task's own shapes, before any freeze

local OWN = { slug = "own-sampled", label = "the task's own sizes" }

local function not_sampled(why)
  return { status = "not_sampled", message = "not checked at the task's own sizes: " .. tostring(why) }
end

-- The check of the blocks in `outputs`; when they fail by their values
-- alone and time is left, checked again beside the reference evaluated in
-- float32 on them (sample_wide): a kernel computing in float32 may be
-- further from a bfloat16 reference than the tolerance and nearer the
-- true value, as the test scale's cases allow for with their own float32
-- evaluation.
local function checked(task, build, dir, outputs, opts, left)
  local function check()
    return harness("sample_check", task_args(task, { "--tests", dir, "--outputs", outputs }),
      { timeout = M.defaults.check_timeout, pool = "light", cpu = opts.cpu, build = build, mem_mb = opts.mem_mb })
  end
  local c = check()
  if c.status ~= "incorrect" or c.reason ~= "mismatch" or left() < M.defaults.sampled_min_s then return c, 0 end
  local w = device_harness("sample_wide", task_args(task, { "--tests", dir, "--outputs", outputs }),
    { timeout = left(), cpu = opts.cpu, build = build, mem_mb = opts.mem_mb or build.mem_mb })
  if w.status ~= "ok" or not w.wide then return c, w.wall_s or 0 end
  return check(), (w.wall_s or 0) + (c.wall_s or 0)
end

-- The verdict of a sampled run's answer `r` and, when it ran, its check.
local function judged(task, build, dir, outputs, r, opts, run_s, left)
  if r.status == "not_sampled" then return { status = "not_sampled", message = r.message } end
  if r.status == "timeout" then
    return not_sampled(string.format("its sampled run ran past %.0f s", run_s))
  end
  -- the machine's limits (memory), a harness error, a process killed from outside: no verdict
  if r.status == "unchecked" or r.status == "error" or (r.status == "crash" and not r.phase) then
    return not_sampled(r.message)
  end
  if r.status ~= "ok" then -- a race, an out-of-bounds access, a crash of its own: the verdict
    return { status = r.status, correct = false, reason = r.reason, phase = r.phase, kind = r.kind,
      message = r.message, checked_at = OWN.label, wall_s = r.wall_s }
  end
  local c, more = checked(task, build, dir, outputs, opts, left)
  local wall = (r.wall_s or 0) + (c.wall_s or 0) + more
  if c.status == "ok" then
    return { status = "ok", correct = true, checked_at = c.checked_at, calls_s = tonumber(r.calls_s),
      max_abs_err = c.max_abs_err, message = "", wall_s = wall, check_s = c.wall_s }
  end
  if c.status == "incorrect" then
    return { status = "incorrect", correct = false, reason = c.reason, message = c.message, block = c.block,
      max_abs_err = c.max_abs_err, checked_at = OWN.label, wall_s = wall, check_s = c.wall_s }
  end
  return not_sampled("its check failed: " .. tostring(c.message))
end

--- The verdict of `build` at the task's own sizes by a sampled run:
--- {status = "ok", checked_at = "the task's own sizes (sampled: ...)"},
--- a failing verdict (incorrect, race, out of bounds, crash) saying where,
--- or {status = "not_sampled", message = why nothing was checked there}.
--- Once per build (a held-out check reuses it). `base`: the test scale's
--- suite, beside which the own sizes' suite is frozen (in the shared
--- suite cache when it is there). All of it ends within `limit_s` (the
--- time a confirmation has left) and M.defaults.sampled_total_s: the
--- freeze and the run get what is left of it, at most their own limits,
--- and none is started with less than M.defaults.sampled_min_s left.
---@param task table
---@param build table
---@param base string
---@param opts? {mem_mb?: number, cpu?: table, sandbox?: boolean, interpret?: any}
---@param limit_s? number
---@return table
function M.sampled(task, build, base, opts, limit_s)
  opts = opts or {}
  if build.sampled_result then return build.sampled_result end
  local limit = math.min(limit_s or math.huge, M.defaults.sampled_total_s)
  local started = os.time()
  local function left() return limit - (os.time() - started) end
  if left() < M.defaults.sampled_min_s then
    return not_sampled(string.format("no time left for it (%.0f s of the evaluation's allowance)", math.max(0, left())))
  end
  local mem = opts.mem_mb or build.mem_mb
  -- the candidate's call planned from the shapes first: a kernel that cannot be sampled costs no freeze
  local plan = device_harness("sample_plan", candidate_args(task, build, { "--sample-seed",
    tostring(M.defaults.sample_seed) }, opts), { timeout = math.min(M.defaults.sampled_plan_s, left()),
    cwd = build.workdir, cpu = opts.cpu, build = build, mem_mb = mem, sandbox = sandbox_for(task, build.workdir, opts) })
  if plan.status == "not_sampled" or plan.status == "compile_error" then
    build.sampled_result = not_sampled((tostring(plan.message):gsub("^not checked at the task's own sizes: ", "")))
    return build.sampled_result
  end
  local s = { args = { "--own-sampled" }, slug = OWN.slug, label = OWN.label, -- split checked on `base`
    timeout = math.min(M.defaults.sampled_freeze_s, left() - M.defaults.sampled_min_s) }
  local dir, err = scaled_suite(task, base, s, { mem_mb = mem, cpu = opts.cpu })
  local res
  if not dir then
    res = not_sampled("its reference could not be frozen there (" .. tostring(err) .. ")")
  elseif left() < M.defaults.sampled_min_s then
    res = not_sampled(string.format("no time left for its run after the freeze (%d s of %.0f s)", os.time() - started,
      limit))
  else
    local outputs = build.workdir .. "/outputs-sampled"
    fs.rm_rf(outputs)
    fs.mkdirs(outputs)
    local extra = { "--tests", dir, "--outputs", outputs, "--sample-seed", tostring(M.defaults.sample_seed) }
    local run_s = math.min(M.defaults.sampled_s, left())
    local r = device_harness("sample", candidate_args(task, build, extra, opts), {
      timeout = run_s, cwd = build.workdir, cpu = opts.cpu, build = build, mem_mb = mem,
      sandbox = sandbox_for(task, build.workdir, opts, visible_inputs(dir)),
    })
    res = judged(task, build, dir, outputs, r, opts, run_s, left)
    fs.rm_rf(outputs)
  end
  build.sampled_result = res
  return res
end

--- An "unchecked" result of escalation for scale reasons (`r`, its reason
--- "scale") replaced by the sampled run's verdict when M.defaults.sampled:
--- ok (the build marked `sampled`: its tests and timing are the sampled
--- run's), a failing verdict, or `r` with why the own sizes were not
--- checked added to its message.
function M.sampled_instead(task, build, base, r, opts)
  if not (M.defaults.sampled and r.status == "unchecked" and r.reason == "scale") then return r end
  local s = M.sampled(task, build, base, opts)
  if s.status == "not_sampled" then
    r.message = tostring(r.message) .. "; " .. s.message
    return r
  end
  if s.status ~= "ok" then return s end
  s.scale_note = string.format("checked at %s (by a sampled run; %s)", s.checked_at,
    (tostring(r.message):gsub("^not checked on this machine: ", "")))
  build.sampled = s
  return { status = "ok", timing = "interpret", interpret = "tpu", checked_at = s.checked_at, checked = true,
    scale_note = s.scale_note, message = "", cases = {}, wall_s = s.wall_s }
end
