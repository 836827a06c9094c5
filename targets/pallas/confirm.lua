--- targets/pallas/confirm.lua: the held-out verdict of a kernel checked
--- at the test scale re-checked at larger scales (interpret mode only),
--- within time estimates, before it counts.
local need, M = ...
local escalate = need "escalate"
local read_json, scaled_suite = escalate.read_json, escalate.scaled_suite

--- A kernel can pass at the test scale and be wrong at the task's own
--- sizes: a bug whose error grows with the sizes (an online softmax that
--- does not rescale its running sum when the maximum grows, a last tile
--- dropped) stays under the tolerance when there are few tiles, and a
--- contracted size divided by the factor narrows the values (13p's logits
--- at a 64th of the hidden size). A kernel that passed its held-out cases
--- at the test scale is therefore run on them again at larger scales, each
--- halving of the test scale's factor in turn, up to
--- M.defaults.confirm_halvings of them, while the next run is estimated to
--- take at most M.defaults.confirm_s (the last run's call seconds times
--- the growth its calls showed from the scale before, at least 2; the
--- first time, the ratio of the reference's FLOPs) and to end within
--- M.defaults.confirm_total_s of the confirmation's start. A wrong output, a
--- crash, a race or an out-of-bounds access at any of them is the verdict.
--- A run out of time, a compile error or its own shape check raised
--- (sizes it was not made for), or the machine's limits (a harness error
--- such as its memory limit, a process killed from outside) end the
--- confirmation with the verdict of the largest scale passed, and a note
--- saying so. Only in interpret mode
--- (a device checks the task's own sizes), and never for a kernel already
--- checked at a larger scale.
M.defaults.confirm_halvings = 3
M.defaults.confirm_s = 120
M.defaults.confirm_total_s = 300 -- s the larger scales of one kernel's confirmation may take, freezes included
-- s all of it may take, the sampled run at the task's own sizes (sampled.lua) included
M.defaults.heldout_total_s = 480

local function scale_flops(dir)
  local rec = read_json(dir .. "/cases.json").test_scale
  return type(rec) == "table" and tonumber(rec.flops) or nil
end

--- The verdict at larger scales of a kernel whose held-out cases passed on
--- `tests_dir`: `step(dir, limit)` runs and checks them on a suite (as
--- M.test does), `last()` is the last run's answer ({calls_s, compile_s}).
--- Returns {verdict = a failing result} or {label = the largest scale
--- passed, note = why no larger one was checked, text = both in words};
--- nil when the test scale is the task's own. `lim`: the freezes at
--- larger scales' memory limit and CPU accumulator ({mem_mb, cpu}). `sampled()` (sampled.lua's M.sampled
--- for the build): the last step, at the task's own sizes by a sampled
--- run, when no scale checked reached them (M.defaults.sampled).
local function confirm_scales(task, tests_dir, step, last, lim)
  local scales = M.larger_scales(task, tests_dir)
  if #scales == 0 then return nil end -- the task's own sizes
  local prev = { calls = tonumber(last().calls_s) or 0, flops = scale_flops(tests_dir), k = 0 }
  local growth, label, refused, started = nil, nil, nil, os.time()
  local function done(note)
    local text = label and ("confirmed at " .. label) or "not confirmed"
    return { label = label, note = note, text = note and (text .. " (" .. note .. ")") or text }
  end
  for k = 1, math.min(#scales, M.defaults.confirm_halvings) do
    local s = scales[k]
    if growth and prev.calls * growth ^ (k - prev.k) > M.defaults.confirm_s then
      return done(string.format("%s not checked: estimated at %.0f s of calls", s.label,
        prev.calls * growth ^ (k - prev.k)))
    end
    -- a scale whose reference cannot be frozen (a trivial output there) is passed over
    local d, err = scaled_suite(task, tests_dir, s, lim)
    if not d then
      refused = string.format("%s not checked: %s", s.label, tostring(err))
      goto next
    end
    do
      local flops = scale_flops(d)
      local g = growth and growth ^ (k - prev.k)
        or ((flops and prev.flops and prev.flops > 0) and flops / prev.flops or 2 ^ (k - prev.k))
      local est = prev.calls * g + (tonumber(last().compile_s) or 0)
      if est > M.defaults.confirm_s then
        return done(string.format("%s not checked: estimated at %.0f s", s.label, est))
      elseif os.time() - started + est > M.defaults.confirm_total_s then
        return done(string.format("%s not checked: estimated at %.0f s, past the confirmation's %d s", s.label, est,
          M.defaults.confirm_total_s))
      end
      local r = step(d, math.max(3 * est, M.defaults.confirm_s))
      if r.status == "ok" and r.checked then
        label, refused = s.label, nil
        local calls = tonumber(last().calls_s) or 0
        growth = math.max(2, prev.calls > 0 and (calls / prev.calls) ^ (1 / (k - prev.k)) or 2)
        prev = { calls = calls, flops = flops, k = k }
      elseif r.status == "timeout" or r.status == "unchecked" or r.status == "rescale"
        or r.status == "compile_error" or r.status == "error" or (r.status == "crash" and not r.phase) then
        -- ... or the machine's limits at the larger sizes (a memory limit, a
        -- process killed): no verdict on the kernel
        return done(string.format("%s not checked: %s", s.label, tostring(r.message)))
      else
        r.message = string.format("at %s (the held-out cases re-checked at a larger scale than the test scale's): %s",
          s.label, tostring(r.message))
        r.checked_at = s.label
        return { verdict = r }
      end
    end
    ::next::
  end
  return done(refused)
end

--- The last step of a confirmation `res` (confirm_scales' answer, or
--- {at = the larger scale an escalated kernel was checked at}): the
--- sampled run at the task's own sizes, `sampled()`, unless a scale
--- checked in full was theirs. Returns `res` with it added, or {verdict}.
function M.confirm_sampled(res, sampled, started)
  local own = "the task's own sizes"
  if not res or res.verdict or res.label == own or res.at == own or not sampled or not M.defaults.sampled then
    return res
  end
  local s = sampled(M.defaults.heldout_total_s - (os.time() - (started or os.time())))
  local before = res.label or res.at
  if s.status == "ok" then
    return { label = s.checked_at, text = "confirmed at " .. (before and (before .. " and at ") or "")
      .. s.checked_at .. (res.note and (" (" .. res.note .. ")") or "") }
  elseif s.status == "not_sampled" then
    res.note = res.note and (res.note .. "; " .. s.message) or s.message
    res.text = (res.text ~= "" and (res.text .. "; ") or "") .. s.message
    return res
  end
  return { verdict = s } -- wrong at the task's own sizes: the verdict, saying where
end

--- confirm_scales, then the sampled run at the task's own sizes (above).
--- The sampled run gets what is left of M.defaults.heldout_total_s.
function M.confirm(task, tests_dir, step, last, lim, sampled)
  local started = os.time()
  return M.confirm_sampled(confirm_scales(task, tests_dir, step, last, lim), sampled, started)
end
