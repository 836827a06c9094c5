--- targets/pallas/freeze.lua: the frozen tests of a task: the reference
--- run once by the harness's `freeze` step (at the test scale, or at a
--- larger one for escalation) and the files made read-only; an existing
--- suite's manifest verified instead.
local need, M, call = ...
local fs = require "mk.fs"
local args = need "args"
local harness, device_harness = call.harness, call.device
local task_args, list_str = args.task, args.list

local function chmod_tree_readonly(dir)
  for _, name in ipairs(fs.list(dir) or {}) do
    local p = dir .. "/" .. name
    if fs.isdir(p) then
      chmod_tree_readonly(p) -- directories stay writable so the tree can be removed
    else
      fs.chmod(p, tonumber("444", 8))
    end
  end
end

local function cases_of(list)
  local out = {}
  for i, c in ipairs(list or {}) do
    out[i] = { id = c.id, seed = math.tointeger(c.seed) or c.seed, heldout = c.heldout, shapes = c.shapes }
  end
  return out
end

--- Freeze the tests from the reference into tests_dir (idempotent: an
--- existing manifest is verified instead).
---@param task table
---@param tests_dir string
---@param opts? {timeout?: number, mem_mb?: number}
---@return table result {status, cases, manifest, manifest_sha, fresh, message}
function M.freeze(task, tests_dir, opts)
  opts = opts or {}
  if type(tests_dir) ~= "string" then error("pallas.freeze: tests_dir must be a string", 2) end
  local manifest = tests_dir .. "/manifest.sha256"
  if fs.exists(manifest) then
    local r = harness("verify", { "--tests", tests_dir }, { timeout = M.defaults.check_timeout, mem_mb = opts.mem_mb })
    if r.status == "ok" then task.tests_dir = tests_dir end
    return {
      status = r.status == "ok" and "ok" or "error", cases = cases_of(r.cases), manifest = manifest,
      manifest_sha = r.manifest_sha, fresh = false, message = r.message, wall_s = r.wall_s, kind = r.kind,
      test_scale = r.test_scale, warnings = r.warnings, -- the freeze's, kept in cases.json
    }
  end
  fs.mkdirs(tests_dir)
  local fargs = { "--tests", tests_dir, "--seeds", list_str(task.seeds), "--heldout", list_str(task.heldout_seeds) }
  local scale = opts.test_scale or task.test_scale
  if opts.scale_args then -- a larger scale for escalation (M.escalate)
    for _, x in ipairs(opts.scale_args) do fargs[#fargs + 1] = x end
  elseif scale ~= nil then
    fargs[#fargs + 1] = "--test-scale"; fargs[#fargs + 1] = scale == false and "off" or tostring(scale)
  end
  local r = device_harness("freeze", task_args(task, fargs), { timeout = opts.timeout or M.defaults.freeze_timeout,
    mem_mb = opts.mem_mb })
  if r.status ~= "ok" then
    return { status = "error", kind = r.kind, message = "freezing the tests failed: " .. r.message, fresh = true,
      wall_s = r.wall_s }
  end
  chmod_tree_readonly(tests_dir)
  task.tests_dir = tests_dir
  return {
    status = "ok", cases = cases_of(r.cases), manifest = manifest, manifest_sha = r.manifest_sha,
    fresh = true, message = table.concat(r.warnings or {}, "; "), warnings = r.warnings, wall_s = r.wall_s,
    test_scale = r.test_scale, scaled_config = r.scaled_config,
  }
end
