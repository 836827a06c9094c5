--- targets/c/runner.lua: the processes a step runs. The target's
--- programs are found (binaries: mkc-run, built from runner.c, and
--- mkc-check); the compiler and mkc-run run sandboxed on candidate code
--- (run_sandboxed, run); mkc-run's answer becomes a status or its result
--- JSON (classify). Also the result table every step returns (result) and
--- where a runner writes its output blob (scratch_blob).
local _, M = ...
local fs = require("mk.fs")
local proc = require("mk.proc")
local cjson = require("cjson.safe")
local home = require("mk.home")
local sandbox = require("mk.services.sandbox")

local R = {}

-- A step's result: `extra`'s fields (or a new table) with status and message.
function R.result(status, message, extra)
  local r = extra or {}
  r.status, r.message = status, message or ""
  return r
end
local result = R.result

local function exists_exe(p) return p and fs.exists(p) end

-- The runner and checker belong to the running engine: built by CMake
-- beside it (<build dir>/targets/c, whatever the build dir is called) or
-- installed with it (<prefix>/share/mkengine/targets/c/bin); $MKC_BIN_DIR
-- overrides both.
local found_bins
function M.binaries()
  if found_bins then return found_bins end
  local dirs = {}
  if os.getenv("MKC_BIN_DIR") then dirs[#dirs + 1] = os.getenv("MKC_BIN_DIR") end
  local beside = home.helper("targets/c/mkc-run", "share/mkengine/targets/c/bin/mkc-run")
  if beside then dirs[#dirs + 1] = beside:match("^(.*)/[^/]*$") end
  if os.getenv("MKENGINE_BUILD") then dirs[#dirs + 1] = os.getenv("MKENGINE_BUILD") .. "/targets/c" end
  dirs[#dirs + 1] = home.path("targets/c/bin")
  for _, d in ipairs(dirs) do
    if exists_exe(d .. "/mkc-run") and exists_exe(d .. "/mkc-check") then
      found_bins = { run = fs.realpath(d .. "/mkc-run"), check = fs.realpath(d .. "/mkc-check") }
      return found_bins
    end
  end
  error("target c: mkc-run/mkc-check not found (looked in " .. table.concat(dirs, ", ")
    .. "); build the engine with cmake (they are built beside it)", 0)
end

local function nonce()
  local f = io.open("/dev/urandom", "rb")
  local raw = f and f:read(16) or tostring(os.time()) .. tostring({})
  if f then f:close() end
  return (raw:gsub(".", function(c) return string.format("%02x", c:byte()) end))
end
R.nonce = nonce

local function path_dir(p) return (p:match("^(.*)/[^/]*$")) end
R.path_dir = path_dir

-- Run one of our helper programs on candidate code, sandboxed.
local function run_sandboxed(argv, opts)
  local env = { PATH = "/usr/local/bin:/usr/bin:/bin", LANG = "C", LC_ALL = "C" }
  if opts.threads then env.OMP_NUM_THREADS = tostring(opts.threads) end
  for k, v in pairs(opts.env or {}) do env[k] = v end
  local spec = {
    argv = argv,
    cwd = opts.workdir,
    env = env,
    clear_env = true, -- API keys and the user's environment stay out
    stdin = opts.stdin,
    timeout = opts.timeout,
    max_output = opts.max_output or (1 << 20),
    limits = opts.limits,
    sandbox = { workdir = opts.workdir, ro = opts.ro, rw = opts.rw, network = false },
  }
  local r, err = proc.run(sandbox.apply(spec))
  if not r then return nil, err end
  -- opts.cpu: the evaluation's accumulator of its processes' CPU seconds
  if opts.cpu then opts.cpu.s = opts.cpu.s + (r.cpu_s or 0) end
  return r
end
R.run_sandboxed = run_sandboxed

-- Turn a runner process result into a status, or the parsed result JSON.
local function classify(r, nonce_hex, timeout, limits)
  local out = r.stdout or ""
  local function find(tag) return out:match("\n?" .. tag .. " " .. nonce_hex .. " ([^\n]*)") end
  if r.status == "timeout" then
    return result("timeout", string.format("the kernel did not finish within %gs (a hang, an infinite loop, "
      .. "or far too slow for the benchmark size)", timeout or 0))
  end
  local rej = find("MKREJECT")
  if rej then
    local name = rej:match("syscall (%S+)") or "?"
    return result("rejected", "the kernel made a forbidden system call (" .. name .. "): kernels may not open or "
      .. "write files, create processes, load libraries, signal other processes or use the network", { syscall = name })
  end
  local crash = find("MKCRASH")
  if crash then
    local sig = crash:match("^(%S+)") or "signal"
    local case = crash:match("case=(%S+)")
    local msg = "the kernel crashed with " .. sig .. (case and case ~= "-" and (" on case " .. case) or "")
    local input = crash:match("wrote%-to%-input=(%S+)")
    if input then msg = msg .. ": it wrote to the read-only input '" .. input .. "'"
    elseif crash:find("null%-pointer") then
      msg = msg .. ": null pointer access (an allocation failed? the memory limit is "
        .. tostring(limits and limits.mem_mb or "?") .. " MB)"
    elseif sig == "SIGSEGV" then msg = msg .. " (out-of-bounds access: check the loop bounds for sizes that are not "
      .. "multiples of the vector width)"
    elseif sig == "SIGABRT" then msg = msg .. " (abort(): an assertion failed or the heap is corrupted)" end
    return result("crash", msg, { signal = sig })
  end
  local ferr = find("MKERROR")
  if ferr then
    if ferr:find("cannot allocate") then return result("crash", "out of memory: " .. ferr) end
    if ferr:find("cannot load the kernel") then return result("compile_error", ferr) end
    return result("error", "runner: " .. ferr)
  end
  if r.truncated then
    return result("rejected", "the kernel printed more than " .. (1 << 20) .. " bytes; kernels must not print")
  end
  local res = find("MKRESULT")
  if not res then
    if r.status == "signaled" then
      local s = r.signal
      local why = (s == 9 or s == "SIGKILL") and " (SIGKILL: probably the memory limit of "
        .. tostring(limits and limits.mem_mb or "?") .. " MB)" or ""
      return result("crash", "the kernel's process was killed by signal " .. tostring(s) .. why, { signal = s })
    end
    return result("crash", "the kernel's process exited (code " .. tostring(r.code)
      .. ") before the runner finished: kernels must return, not exit"
      .. ((r.stderr or "") ~= "" and ("; stderr: " .. r.stderr:sub(1, 300)) or ""))
  end
  local j = cjson.decode(res)
  if not j then return result("error", "runner printed an unreadable result") end
  return nil, j
end
R.classify = classify

local function runner_limits(bytes)
  local mb = math.ceil((bytes or 0) / 1048576)
  return { mem_mb = 2048 + 4 * mb, fsize_mb = 256 + 2 * mb }
end
R.limits = runner_limits

-- Where a runner writes its output blob: a private directory (bound
-- read-write into that runner's sandbox alone) under opts.scratch — the
-- evaluator puts it on a RAM file system, where writing and reading back
-- hundreds of MB costs a fraction of a disk-backed one — else the build's
-- directory. Returns the directory (nil for the build's), the blob path and
-- the function that removes both.
local function scratch_blob(opts, build, n, what)
  if not opts.scratch then
    local blob = build.workdir .. "/" .. what .. "-" .. n .. ".bin"
    return nil, blob, function() fs.remove(blob) end
  end
  local sdir = opts.scratch .. "/" .. what .. "-" .. n
  fs.mkdirs(sdir)
  return sdir, sdir .. "/blob.bin", function() fs.rm_rf(sdir) end
end
R.scratch_blob = scratch_blob

-- Run mkc-run on a plan (sandboxed, the suite's inputs read-only): nil,
-- its answer, the process result; or the result of a failed run.
function R.run(task, build, tests_dir, plan_body, nonce_hex, opts, bytes)
  local bins = M.binaries()
  local timeout = opts.timeout or task.timeout
  local limits = runner_limits(bytes)
  if opts.mem_mb then limits.mem_mb = math.max(opts.mem_mb, 256 + 2 * math.ceil(bytes / 1048576)) end
  local ro = { path_dir(bins.run), tests_dir .. "/inputs" }
  for _, d in ipairs(opts.ro or {}) do ro[#ro + 1] = d end
  local r, err = run_sandboxed({ bins.run }, { workdir = build.workdir, stdin = plan_body,
    ro = ro, rw = opts.scratch and { opts.scratch } or nil,
    timeout = timeout, threads = opts.threads, limits = limits, cpu = opts.cpu })
  if not r then return result("error", "cannot run the runner: " .. tostring(err and err.message)) end
  local st, j = classify(r, nonce_hex, timeout, limits)
  if st then st.stderr = r.stderr; st.wall_s = r.wall_s; return st end
  return nil, j, r
end

return R
