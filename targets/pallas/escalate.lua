--- targets/pallas/escalate.lua: re-testing at larger scales before any
--- verdict: the scales a suite can grow to (larger_scales, widths_scales,
--- labelled by scale_label), their suites frozen once beside it, and a step
--- run again on them while it answers "rescale" (escalate).
local _, M = ...
local fs = require "mk.fs"
local cjson = require "cjson"
local suites = require "mk.eval.suites"

local E = {}

--- A candidate step answers status "rescale" when a case is test-scaled and
--- the kernel is made for larger sizes (an empty grid, a block larger than
--- its array, its own shape check raised). The step is then run again on
--- suites frozen at larger scales, up to the task's own sizes; a scale that
--- cannot be frozen within these limits ends it with status "unchecked".
M.defaults.escalate_timeout = 300 -- s to freeze the reference at one larger scale

-- A JSON object of a suite or an outputs directory (cases.json,
-- progress.json); {} when it is missing or unreadable.
function E.read_json(path)
  local s = fs.read(path)
  local ok, v = pcall(cjson.decode, s or "")
  return ok and type(v) == "table" and v or {}
end
local read_json = E.read_json

local function max_size(config)
  local m = 0
  for k, v in pairs(config or {}) do
    v = math.tointeger(v) -- cjson gives 1024.0
    if v and not tostring(k):lower():find("seed", 1, true) and v > m then m = v end
  end
  return m
end

--- The label of a frozen scale: its factor (1: the task's own sizes) and
--- tier ("widths": only those sizes were divided), as results name it
--- (`checked_at`, `timed_at`); nil when the factor is unknown.
function M.scale_label(factor, tier)
  local f = math.tointeger(factor)
  if not f then return nil end
  if f <= 1 then return "the task's own sizes" end
  return "scale factor " .. f .. (type(tier) == "string" and (" (" .. tier .. " only)") or "")
end

-- The label of the scale a timing step reports it ran at (harness
-- `timed_scale`: the case's factor and tier), or nil.
function E.timed_label(ts)
  return type(ts) == "table" and M.scale_label(ts.factor, ts.tier) or nil
end

--- The larger scales after the one `tests_dir` was frozen at, smallest
--- first, as {args = freeze arguments, label, slug}: halving the recorded
--- scale factor down to 1, or doubling the recorded size cap up to the
--- task's own sizes.
function M.larger_scales(task, tests_dir)
  local info = read_json(tests_dir .. "/cases.json")
  local out = {}
  local rec = type(info.test_scale) == "table" and info.test_scale or type(info.scale) == "table" and info.scale
  local f = rec and math.tointeger(rec.factor)
  if f then
    local tier = type(rec.tier) == "string" and rec.tier or nil -- "widths": only those sizes were scaled
    while f > 1 do
      f = f // 2
      local args = { "--scale-factor", tostring(f) }
      if tier and f > 1 then args[3], args[4] = "--scale-tier", tier end
      out[#out + 1] = { args = args, slug = "f" .. f .. (tier and f > 1 and tier or ""), label = M.scale_label(f, tier) }
    end
    return out
  end
  local cap = math.tointeger(info.test_scale)
  if not cap then return out end
  local top = max_size(task.config)
  cap = cap * 2
  while cap < top do
    out[#out + 1] = { args = { "--test-scale", tostring(cap) }, slug = "cap" .. cap, label = "test scale " .. cap }
    cap = cap * 2
  end
  out[#out + 1] = { args = { "--test-scale", "off" }, slug = "full", label = "the task's own sizes" }
  return out
end

--- When every size scaled together is over the budget before the kernel's
--- blocks fit (a flash attention with 2048-row query blocks needs the
--- sequence at 2048, where heads x sequence^2 x head_dim is 140 GFLOP), the
--- widths alone (heads, head_dim, ...: the freeze's "widths" tier) are
--- divided instead, at the test scale's factor, then smaller factors: the
--- lengths a kernel tiles by keep the task's own sizes. Empty when the test
--- scale was already a widths tier or has no factor.
function M.widths_scales(tests_dir)
  local info = read_json(tests_dir .. "/cases.json")
  local rec = type(info.test_scale) == "table" and info.test_scale or nil
  local f = rec and math.tointeger(rec.factor)
  local out = {}
  if not f or type(rec.tier) == "string" then return out end
  while f > 1 do
    out[#out + 1] = { args = { "--scale-factor", tostring(f), "--scale-tier", "widths" }, slug = "f" .. f .. "widths",
      label = M.scale_label(f, "widths") }
    f = f // 2
  end
  return out
end

local freezing = {} -- escalation suite dir -> semaphore (one freeze of it at a time)

-- The cache key of a suite in the shared suite cache (mk.eval.suites), or
-- nil for a suite elsewhere (an evaluator's own directory, --fresh).
local function cached_key(base)
  local parent, key = base:match("^(.*)/(%x+)$")
  if not key or #key ~= 64 then return nil end
  local a, b = fs.realpath(parent), fs.realpath(suites.dir())
  return a and a == b and key or nil
end

-- Freeze `task` at scale `s` into `dir`, the task's own suite kept; its
-- reference, when too large for one process, run in parts checked on the
-- test scale's suite `base` (harness freeze --base). `lim`: {mem_mb: the
-- process's memory limit, cpu: the evaluation's accumulator of CPU seconds
-- and peak memory (target.lua)}.
local function freeze_at(task, dir, s, base, lim)
  local keep = task.tests_dir
  local args = {}
  for i, x in ipairs(s.args) do args[i] = x end
  args[#args + 1] = "--base"; args[#args + 1] = base
  local r = M.freeze(task, dir, { scale_args = args, timeout = s.timeout or M.defaults.escalate_timeout,
    mem_mb = lim.mem_mb, cpu = lim.cpu })
  task.tests_dir = keep
  return r
end

-- The suite at scale `s` of a suite in the shared cache: frozen there once
-- under its lock (mk.eval.suites.ensure: other engines wait, a reader never
-- sees half of one), then verified. A scale whose reference cannot be
-- frozen (kind cannot_freeze: its output trivial there, the reference
-- failing) is remembered beside it, so the next evaluation does not try
-- again; the machine's limits (memory, time) are not.
local function cached_suite(task, key, s, base, lim)
  local name = key .. ".scale-" .. s.slug
  local refused = suites.path(name) .. ".refused"
  local why = fs.read(refused)
  if why then return nil, why end
  local kind
  local dir, err = suites.ensure(name, function(tmp)
    local r = freeze_at(task, tmp, s, base, lim)
    kind = r.kind
    return r
  end)
  if not dir then
    if kind == "cannot_freeze" then fs.write(refused, tostring(err), { atomic = true }) end
    return nil, err
  end
  local r = freeze_at(task, dir, s, base, lim) -- verified, as every evaluator verifies the suites it opens
  if r.status ~= "ok" then return nil, r.message end
  return dir
end

--- The suite at scale `s` beside `base` (frozen once, then verified; in the
--- shared suite cache when `base` is there), or nil, why. `lim`:
--- {mem_mb = the freeze's memory limit, cpu = the evaluation's accumulator
--- of its processes' CPU seconds and peak memory}, both optional.
function E.scaled_suite(task, base, s, lim)
  lim = lim or {}
  local dir = base .. ".scale-" .. s.slug
  local key = cached_key(base)
  local function freeze()
    if key then return cached_suite(task, key, s, base, lim) end
    local r = freeze_at(task, dir, s, base, lim)
    if r.status ~= "ok" then return nil, r.message end
    return dir
  end
  local ok, tasklib = pcall(require, "mk.services.task")
  if ok and coroutine.isyieldable() then
    freezing[dir] = freezing[dir] or tasklib.semaphore(1)
    return freezing[dir]:with(freeze)
  end
  return freeze()
end
local scaled_suite = E.scaled_suite

local function unchecked(why, how)
  return { status = "unchecked", correct = false, reason = "scale",
    message = "not checked on this machine: at the test scale " .. tostring(why) .. "; " .. how }
end

--- Run `step(tests_dir)` (a harness step's result) on `tests_dir`, and while
--- it answers "rescale", again on suites at larger scales. Returns the last
--- result, with `checked_at` (the scale's label) and `scale_note` when it
--- escalated, and the tests dir it ran on; "unchecked" when the next scale
--- could not be frozen or its step ran out of time. `lim`: the freezes at
--- larger scales' memory limit and CPU accumulator ({mem_mb, cpu}: E.scaled_suite).
function M.escalate(task, tests_dir, step, base, lim)
  base = base or tests_dir
  local r = step(tests_dir)
  if r.status ~= "rescale" then return r, tests_dir end
  local why, dir = r.reason or r.message, tests_dir
  local scales, widths, i, refused = M.larger_scales(task, dir), M.widths_scales(dir), 0, nil
  while i < #scales do
    i = i + 1
    local s = scales[i]
    local d, err = scaled_suite(task, base, s, lim)
    if not d then
      refused = (refused and refused .. "; " or "") .. string.format("at %s the reference could not be frozen " ..
        "within this machine's limits (%s)", s.label, tostring(err))
      if not widths[1] then return unchecked(why, refused), dir end
      scales, widths, i = widths, {}, 0 -- the widths alone divided: the lengths keep their sizes
      goto continue
    end
    dir = d
    r = step(d)
    if r.status == "timeout" then
      return unchecked(why, string.format("at %s it ran out of time (%s)", s.label, tostring(r.message))), dir
    end
    if r.status == "unchecked" then -- past this machine's limits there (its memory)
      r.message = string.format("at %s (at the test scale: %s): %s", s.label, tostring(why), tostring(r.message))
      return r, dir
    end
    if r.status ~= "rescale" then
      r.checked_at = s.label
      r.scale_note = string.format("checked at %s (at the test scale: %s)", s.label, why)
      return r, dir
    end
    ::continue::
  end
  return unchecked(why, refused or "there is no larger scale of this task to check it at"), dir
end

return E
