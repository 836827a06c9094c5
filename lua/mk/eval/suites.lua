--- mk.eval.suites: frozen test suites and baseline measurements stored
--- once per content under the engine's cache directory, shared by runs,
--- bench repeats and standalone `mkengine eval`.
---
---   <cache>/mkengine/suites/<key>/        a frozen suite (files read-only)
---   <cache>/mkengine/suites/<key>.lock    held while one process freezes it
---   <cache>/mkengine/baselines/<bkey>.json  the reference's benchmark
---
--- `key` is the SHA-256 of what the suite's bytes follow: the task's
--- definition and reference, the effective test shapes and benchmark size,
--- and the target's machine facts (CPU model, compiler, cache size). The
--- suite is verified (manifest, seal) by the target whenever an evaluator
--- opens it; a run directory records the key in suite.json. See
--- docs/api/eval.md, "Suite cache".
local fs = require("mk.fs")
local task_lib = require("mk.services.task")
local hash = require("mk.hash")
local json = require("mk.services.json")
local cjson = require("cjson.safe")

local M = { VERSION = 1, BASELINE_VERSION = 2 } -- baselines 2: a multi-configuration suite's sums every configuration

--- The cache root: $MKENGINE_CACHE, else $XDG_CACHE_HOME, else ~/.cache; then /mkengine.
function M.root()
  local base = os.getenv("MKENGINE_CACHE")
  if not base or base == "" then base = os.getenv("XDG_CACHE_HOME") end
  if not base or base == "" then base = (os.getenv("HOME") or "/tmp") .. "/.cache" end
  return base .. "/mkengine"
end

function M.dir() return M.root() .. "/suites" end

local function sorted_sizes(list)
  local out = {}
  for i, s in ipairs(list or {}) do
    local c = {}
    for k, v in pairs(s) do c[k] = math.tointeger(v) or v end
    out[i] = c
  end
  return out
end

--- The content key of `task`'s frozen suite on `target` (hex SHA-256).
---@param task table a loaded task
---@param target table its target module (must have suite_facts)
---@param opts table|nil bench_sizes, llc_bytes (as given to freeze)
function M.key(task, target, opts)
  opts = opts or {}
  local def = task.dir and fs.read(task.dir .. "/task.lua") or ""
  local desc = json.canonical {
    v = M.VERSION, target = task.target, name = task.name, task_lua = def, reference = task.reference or "",
    test_sizes = sorted_sizes(task.test_sizes), heldout_sizes = sorted_sizes(task.heldout_sizes),
    seeds = task.seeds, heldout_seeds = task.heldout_seeds, bench_seed = task.bench_seed,
    bench_sizes = sorted_sizes { opts.bench_sizes or task.sizes }[1],
    facts = target.suite_facts(task, opts),
  }
  return hash.sha256(desc)
end

--- Path of the suite `key` (whether or not it exists).
function M.path(key) return M.dir() .. "/" .. key end

--- The suite of `key`, frozen by `freeze(tmpdir)` when the cache lacks it.
--- Concurrent callers (other coroutines or processes) wait for the one that
--- freezes. freeze(dir) returns a result {status, message}. Returns the
--- suite's path and whether it was frozen now, or nil, message.
function M.ensure(key, freeze)
  local dir = M.dir()
  local final = M.path(key)
  if fs.exists(final .. "/frozen.json") then return final, false end
  assert(fs.mkdirs(dir))
  local lock
  for _ = 1, 36000 do -- up to an hour behind another freezer
    lock = fs.lock(final .. ".lock")
    if lock then break end
    task_lib.sleep(0.1)
  end
  if not lock then return nil, "timed out waiting for another process freezing " .. final end
  if fs.exists(final .. "/frozen.json") then lock:unlock(); return final, false end
  -- freeze beside it, then rename: a reader never sees a half-frozen suite
  local tmp = string.format("%s/.tmp-%s-%d", dir, key:sub(1, 16), math.random(1, 1 << 30))
  fs.rm_rf(final) -- a directory without frozen.json is a freeze that died
  local ok, r = pcall(freeze, tmp)
  if not ok or r.status ~= "ok" then
    fs.rm_rf(tmp)
    lock:unlock()
    return nil, ok and r.message or tostring(r)
  end
  local rok, rerr = fs.rename(tmp, final)
  lock:unlock()
  if not rok then fs.rm_rf(tmp); return nil, "cannot store the suite: " .. tostring(rerr and rerr.message or rerr) end
  return final, true
end

-- ------------------------------------------------------------- baselines

--- Key of a baseline measurement: the suite, the machine and the
--- benchmark's settings.
function M.baseline_key(suite_key, machine, settings)
  return hash.sha256(json.canonical { v = M.VERSION, bv = M.BASELINE_VERSION, suite = suite_key, machine = machine,
    settings = settings })
end

--- A stored baseline result, or nil.
function M.get_baseline(bkey)
  local s = fs.read(M.root() .. "/baselines/" .. bkey .. ".json")
  local j = s and cjson.decode(s)
  if type(j) ~= "table" or j.status ~= "ok" or type(j.latency_s) ~= "number" then return nil end
  return j
end

--- Store a baseline result (read-only file, written atomically).
function M.put_baseline(bkey, r)
  local d = M.root() .. "/baselines"
  fs.mkdirs(d)
  local keep = { status = r.status, message = r.message, latency_s = r.latency_s, spread = r.spread, reps = r.reps,
    min_s = r.min_s, p10_s = r.p10_s, p90_s = r.p90_s, median_undisturbed_s = r.median_undisturbed_s,
    timed_at = r.timed_at, configurations = r.configurations, measured_at = os.time() }
  local path = d .. "/" .. bkey .. ".json"
  fs.remove(path)
  fs.write(path, cjson.encode(keep), { atomic = true })
  fs.chmod(path, 292)
end

return M
