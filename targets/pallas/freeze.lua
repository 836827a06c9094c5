--- targets/pallas/freeze.lua: the frozen tests of a task: the reference
--- run once by the harness's `freeze` step (at the test scale, or at a
--- larger one for escalation) and the files made read-only; an existing
--- suite's manifest verified instead.
local need, M, call = ...
local fs = require "mk.fs"
local hash = require "mk.hash"
local home = require "mk.home"
local cjson = require "cjson"
local args = need "args"
local harness, device_harness = call.harness, call.device
local task_args, list_str = args.task, args.list

--- Frozen suites live in the shared suite cache (mk.eval.suites) when the
--- evaluator asks for it: keyed by the task's content and suite_facts
--- below, so a second evaluation of a task verifies the suite instead of
--- freezing it again, and so do the suites at larger scales frozen beside
--- it (escalate.lua). A complete suite has `frozen.json` (written after
--- the harness's freeze; no part of the manifest).
M.suite_cache = true

-- The harness's HARNESS_VERSION (protocol.py): bumped when frozen suites' content changes.
local function harness_version()
  local src = fs.read(home.path("targets/pallas/harness/protocol.py")) or ""
  return tonumber(src:match("\nHARNESS_VERSION = (%d+)")) or 0
end

-- The JAX and jaxlib release of the task's interpreter: a digest of their
-- version.py files on its paths (random numbers and lowerings follow it).
local function jax_release(task)
  local parts = {}
  for _, p in ipairs((task.python or {}).paths or {}) do
    for _, lib in ipairs { p .. "/lib", p .. "/lib64" } do
      for _, py in ipairs(fs.list(lib) or {}) do
        for _, sp in ipairs { "site-packages", "dist-packages" } do
          for _, m in ipairs { "jax", "jaxlib" } do
            local v = py:match("^python") and fs.read(lib .. "/" .. py .. "/" .. sp .. "/" .. m .. "/version.py")
            if v then parts[#parts + 1] = m .. "\0" .. v end
          end
        end
      end
    end
  end
  table.sort(parts)
  return hash.sha256(table.concat(parts, "\1"))
end

-- Accelerator device nodes on this host: a device's suite is frozen at the
-- task's own sizes, a CPU's at the test scale.
local function accelerators()
  local out = {}
  for _, n in ipairs(fs.list("/dev") or {}) do
    if n:match("^accel%d") or n:match("^nvidia%d") then out[#out + 1] = n end
  end
  table.sort(out)
  return out
end

--- What a Pallas suite's bytes follow besides the task's reference and
--- seeds (mk.eval.suites.key): the harness's version, the interpreter and
--- its JAX release, a MaxKernel task's kernel_task.yaml (its tolerance
--- lists), the dtype and test scale asked for, the platform
--- ($JAX_PLATFORMS, the accelerators present) and $MK_PALLAS_TEST_SCALE.
function M.suite_facts(task)
  local env = call.env()
  local function var(name) return env[name] or os.getenv(name) or "" end
  return {
    harness = harness_version(), python = call.python(), jax = jax_release(task),
    yaml = task.format == "maxkernel" and (fs.read(task.dir .. "/kernel_task.yaml") or "") or "",
    dtype = task.dtype or "", test_scale = tostring(task.test_scale), platforms = var("JAX_PLATFORMS"),
    test_scale_env = var("MK_PALLAS_TEST_SCALE"), accelerators = accelerators(),
  }
end

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
---@param opts? {timeout?: number, mem_mb?: number, cpu?: table}
---@return table result {status, cases, manifest, manifest_sha, fresh, message}
function M.freeze(task, tests_dir, opts)
  opts = opts or {}
  if type(tests_dir) ~= "string" then error("pallas.freeze: tests_dir must be a string", 2) end
  local manifest = tests_dir .. "/manifest.sha256"
  if fs.exists(manifest) then
    local r = harness("verify", { "--tests", tests_dir }, { timeout = M.defaults.check_timeout, mem_mb = opts.mem_mb,
      cpu = opts.cpu })
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
  -- opts.cpu: an evaluation's freeze at a larger scale counts in its CPU seconds and peak memory
  local r = device_harness("freeze", task_args(task, fargs), { timeout = opts.timeout or M.defaults.freeze_timeout,
    mem_mb = opts.mem_mb, cpu = opts.cpu })
  if r.status ~= "ok" then
    return { status = "error", kind = r.kind, message = "freezing the tests failed: " .. r.message, fresh = true,
      wall_s = r.wall_s }
  end
  -- the mark of a complete suite (mk.eval.suites), written after the manifest
  fs.write(tests_dir .. "/frozen.json", cjson.encode { target = "pallas", harness_version = r.harness_version,
    manifest_sha = r.manifest_sha, test_scale = r.test_scale and r.test_scale.factor })
  chmod_tree_readonly(tests_dir)
  task.tests_dir = tests_dir
  return {
    status = "ok", cases = cases_of(r.cases), manifest = manifest, manifest_sha = r.manifest_sha,
    fresh = true, message = table.concat(r.warnings or {}, "; "), warnings = r.warnings, wall_s = r.wall_s,
    test_scale = r.test_scale, scaled_config = r.scaled_config,
  }
end
