--- targets/c/freeze.lua: the frozen suite of a task: the reference
--- compiled and run once to write every case's inputs and expected
--- outputs, the files made read-only and sealed in a manifest that every
--- later check verifies; an existing suite verified instead.
local need, M = ...
local fs = require("mk.fs")
local cjson = require("cjson.safe")
local hash = require("mk.hash")
local task_lib = require("mk.services.task")
local task_mod = need "task"
local runner = need "runner"
local suite = need "suite"
local check = need "check"
local machine = need "machine"
local dims_of, set_bytes, size_label = task_mod.dims_of, task_mod.set_bytes, task_mod.size_label
local result, nonce, run_sandboxed, classify = runner.result, runner.nonce, runner.run_sandboxed, runner.classify
local path_dir, runner_limits = runner.path_dir, runner.limits
local read_meta, case_list, case_plan = suite.read_meta, suite.case_list, suite.case_plan
local manifest_lines, checker = check.manifest_lines, check.run
local llc_bytes = machine.llc_bytes

local function sha256_of(path) return (hash.sha256_file(path)) end

-- What the frozen suite depends on: the reference, the signature and the
-- case list (a runner may add test shapes after loading the task).
local function task_fingerprint(task)
  local ids = {}
  for _, g in ipairs { "search", "heldout" } do
    for _, c in ipairs(case_list(task, g)) do ids[#ids + 1] = c.id end
  end
  local h = 0
  local s = task.reference .. "\0" .. M.signature(task) .. "\0" .. table.concat(ids, ",")
  for i = 1, #s do h = (h * 31 + s:byte(i)) % 4294967291 end
  return string.format("%s:%d:%08x", task.name, #ids, h)
end

-- An existing frozen suite: the same task version and benchmark size, and
-- no file changed since it was frozen.
local function verify_frozen(task, tests_dir, meta, opts, t0)
  if meta.task ~= task_fingerprint(task) or (opts.bench_sizes and size_label(task, opts.bench_sizes)
      ~= size_label(task, meta.bench_sizes)) then
    return result("error", "tests in " .. tests_dir .. " were frozen for a different version of task " .. task.name)
  end
  local vl = manifest_lines(tests_dir, meta)
  vl[#vl + 1] = "verify"
  local j, err = checker(table.concat(vl, "\n") .. "\n")
  if not j then return result("error", err) end
  if not j.ok then return result("error", "frozen tests were modified: " .. tostring(j.error)) end
  return result("ok", "", { fresh = false, cases = meta.ncases, manifest = tests_dir .. "/manifest.sha256",
    manifest_sha = meta.manifest_sha, wall_s = task_lib.now() - t0, meta = meta })
end

-- The frozen suite's layout: rotating input sets, so a timed call rarely
-- finds its inputs cached: at least 2, at most 16 and at most 64 MB of
-- them unless 2 need more (every set is frozen, read by each benchmark,
-- and its outputs checked after it); when they cover less than twice the
-- last-level cache, the runner evicts each timed call's own data from the
-- caches before it (flush_bytes > 0 turns that on; see
-- targets/c/runner.c, evict_case).
local function suite_meta(task, opts, bench_sizes)
  local per_set = set_bytes(task, bench_sizes)
  local llc = opts.llc_bytes or llc_bytes()
  local sets = math.max(2, math.min(16, math.ceil(math.min(2 * llc, 64 << 20) / math.max(per_set, 1))))
  return { task = task_fingerprint(task), sets = sets, per_set_bytes = per_set,
    flush_bytes = math.max(0, 2 * llc - sets * per_set), llc_bytes = llc, bench_sizes = bench_sizes }
end

-- The reference's run that writes every case's inputs and expected
-- outputs: its answer | nil, error result.
local function generate_cases(task, tests_dir, bdir, so, all, meta, opts)
  local plan = { "nonce " .. nonce(), "mode gen", "so " .. so }
  for _, c in ipairs(all) do
    fs.mkdirs(tests_dir .. "/inputs/" .. c.id)
    fs.mkdirs(tests_dir .. "/expected/" .. c.id)
    plan[#plan + 1] = case_plan(task, c, tests_dir, "gen", true)
  end
  local bins = M.binaries()
  local stdin = table.concat(plan, "\n") .. "\n"
  local n = stdin:match("nonce (%x+)")
  local r, err = run_sandboxed({ bins.run }, { workdir = bdir, stdin = stdin, rw = { tests_dir },
    ro = { path_dir(bins.run) }, timeout = opts.timeout or 600, threads = opts.threads,
    limits = runner_limits(meta.per_set_bytes * meta.sets) })
  if not r then return nil, result("error", "cannot run the reference: " .. tostring(err and err.message)) end
  local st, j = classify(r, n, opts.timeout or 600)
  if st then return nil, result("error", "the reference failed while freezing the tests: " .. st.message) end
  return j
end

-- The manifest over every input and expected file (and the probes'
-- reference), the files made read-only first: hashing then records each
-- file's final identity (the seal lets later checks skip re-hashing an
-- unchanged file). Sets meta.manifest_sha and meta.seal_sha; nil, error
-- result when the files cannot be hashed.
local function seal_suite(tests_dir, all, meta)
  local lines = { ".reference/kernel.so" } -- the probes' reference
  for _, c in ipairs(all) do
    for _, kind in ipairs { "inputs", "expected" } do
      for _, f in ipairs(fs.list(tests_dir .. "/" .. kind .. "/" .. c.id) or {}) do
        lines[#lines + 1] = kind .. "/" .. c.id .. "/" .. f
      end
    end
  end
  for _, rel in ipairs(lines) do fs.chmod(tests_dir .. "/" .. rel, 292) end -- 0444
  local jm, merr = checker("hash " .. tests_dir .. "\n" .. table.concat(lines, "\n") .. "\n")
  if not jm then return nil, result("error", merr) end
  if not jm.sha256 then return nil, result("error", "mkc-check could not hash the frozen files: " .. tostring(jm.error)) end
  local man, seal = {}, {}
  for i, rel in ipairs(lines) do
    man[i] = jm.sha256[i] .. "  " .. rel
    seal[i] = rel .. " " .. jm.seal[i]
  end
  fs.write(tests_dir .. "/manifest.sha256", table.concat(man, "\n") .. "\n")
  fs.write(tests_dir .. "/manifest.seal", table.concat(seal, "\n") .. "\n")
  fs.chmod(tests_dir .. "/manifest.seal", 292)
  meta.manifest_sha = sha256_of(tests_dir .. "/manifest.sha256")
  meta.seal_sha = sha256_of(tests_dir .. "/manifest.seal")
  return true
end

--- Freeze the test suite of `task` into tests_dir (idempotent).
function M.freeze(task, tests_dir, opts)
  opts = opts or {}
  local t0 = task_lib.now()
  local okd, derr = fs.mkdirs(tests_dir)
  if not okd or not fs.isdir(tests_dir) then
    return result("error", "cannot create the tests directory " .. tests_dir .. ": " .. tostring(derr and derr.message or "not a directory"))
  end
  tests_dir = fs.realpath(tests_dir)
  local meta = read_meta(tests_dir)
  if meta and fs.exists(tests_dir .. "/manifest.sha256") then return verify_frozen(task, tests_dir, meta, opts, t0) end
  -- compile the reference like a candidate (trusted: no screen)
  local bdir = tests_dir .. "/.reference"
  local b = M.compile(task, { [task.candidate_file] = task.reference }, bdir, { trusted = true })
  if b.status ~= "ok" then return result("error", "the reference does not compile: " .. b.message) end
  local bench_sizes = opts.bench_sizes or task.sizes
  for _, a in ipairs(task.args) do
    if a.shape and not dims_of(a, bench_sizes) then return result("error", "opts.bench_sizes lacks a size symbol") end
  end
  meta = suite_meta(task, opts, bench_sizes)
  local all = {}
  for _, g in ipairs { "search", "heldout", "bench" } do
    for _, c in ipairs(case_list(task, g, meta)) do all[#all + 1] = c end
  end
  local j, gerr = generate_cases(task, tests_dir, bdir, b.so, all, meta, opts)
  if not j then return gerr end
  local sealed, serr = seal_suite(tests_dir, all, meta)
  if not sealed then return serr end
  meta.ncases = #all
  meta.reference_kernel_s = {}
  for _, cj in ipairs(j.cases or {}) do meta.reference_kernel_s[cj.id] = cj.kernel_s end
  fs.write(tests_dir .. "/frozen.json", cjson.encode(meta))
  fs.chmod(tests_dir .. "/manifest.sha256", 292)
  return result("ok", "", { fresh = true, cases = #all, manifest = tests_dir .. "/manifest.sha256",
    manifest_sha = meta.manifest_sha, wall_s = task_lib.now() - t0, meta = meta })
end
