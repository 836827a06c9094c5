--- targets/c/target.lua: the C target. A candidate is one C file defining the task's
--- entry; it is compiled (sandboxed) into a shared object together with a
--- generated glue function, and run by targets/c/mkc-run inside the sandbox
--- on frozen inputs; targets/c/mkc-check compares its outputs with the frozen
--- expected outputs in a separate, unsandboxed process. See
--- docs/task-format.md and docs/api/targets.md.
local fs = require("mk.fs")
local proc = require("mk.proc")
local cjson = require("cjson.safe")
local guard = require("mk.services.guard")
local hash = require("mk.hash")
local home = require("mk.home")
local sandbox = require("mk.services.sandbox")
local task_lib = require("mk.services.task")
local util = require("mk.services.util")

local M = { name = "c" }

-- ---------------------------------------------------------------- helpers

local CTYPE = { float32 = "float", float64 = "double", int32 = "int32_t", int64 = "int64_t" }
local SHORT = { float32 = "f32", float64 = "f64", int32 = "i32", int64 = "i64" }
local SIZE = { float32 = 4, float64 = 8, int32 = 4, int64 = 8 }

local function result(status, message, extra)
  local r = extra or {}
  r.status, r.message = status, message or ""
  return r
end

local function bad(msg) return nil, { kind = "bad_task", message = msg } end

local fmt_s, sh_quote = util.fmt_s, util.sh_quote

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

-- Evaluate a size formula: a Lua expression over the size symbols, or a function.
local function formula(spec, sizes)
  if spec == nil then return nil end
  if type(spec) == "function" then return spec(sizes) end
  if type(spec) == "number" then return spec end
  local env = setmetatable({}, { __index = function(_, k) return sizes[k] or math[k] end })
  local f, err = load("return " .. spec, "=formula", "t", env)
  if not f then error(err, 0) end
  return f()
end

local function dims_of(arg, sizes)
  local n, dims = 1, {}
  for _, d in ipairs(arg.shape) do
    local v = type(d) == "number" and d or sizes[d]
    if type(v) ~= "number" then return nil, "unknown size symbol '" .. tostring(d) .. "'" end
    n = n * v
    dims[#dims + 1] = math.tointeger(v) or v
  end
  return n, dims
end

local function scalar_value(arg, sizes)
  local v = arg.value
  if v == nil then v = arg.name end
  if type(v) == "string" then v = sizes[v] end
  return v
end

-- Size symbols in the order they appear in the arguments (for case ids).
local function size_label(task, sizes)
  local seen, parts = {}, {}
  for _, a in ipairs(task.args) do
    for _, d in ipairs(a.shape or {}) do
      if type(d) == "string" and not seen[d] then
        seen[d] = true
        parts[#parts + 1] = tostring(math.tointeger(sizes[d]) or sizes[d])
      end
    end
  end
  return table.concat(parts, "x")
end

-- ------------------------------------------------------------ task loading

local function validate(t, dir)
  local where = dir .. "/task.lua: "
  if type(t) ~= "table" then return bad(where .. "must return a table") end
  if type(t.name) ~= "string" or not t.name:match("^[%w_.%-]+$") then return bad(where .. "'name' must be a short identifier") end
  if type(t.description) ~= "string" then return bad(where .. "'description' must be a string") end
  t.entry = t.entry or "kernel"
  if type(t.entry) ~= "string" or not t.entry:match("^[%a_][%w_]*$") then return bad(where .. "'entry' must be a C identifier") end
  if type(t.args) ~= "table" or #t.args == 0 then return bad(where .. "'args' must be a non-empty list") end
  if type(t.sizes) ~= "table" then return bad(where .. "'sizes' (the benchmark size) is required") end
  local names = {}
  for i, a in ipairs(t.args) do
    local w = where .. "args[" .. i .. "]: "
    if type(a) ~= "table" or type(a.name) ~= "string" or not a.name:match("^[%a_][%w_]*$") then
      return bad(w .. "needs a C identifier 'name'")
    end
    if names[a.name] then return bad(w .. "duplicate name " .. a.name) end
    names[a.name] = true
    if a.kind == "int" or a.kind == "float" then
      local v = scalar_value(a, t.sizes)
      if type(v) ~= "number" then return bad(w .. "scalar '" .. a.name .. "' has no value (add value= or a size symbol)") end
    elseif a.kind == "in" or a.kind == "out" or a.kind == "inout" then
      a.dtype = a.dtype or "float32"
      if not CTYPE[a.dtype] then return bad(w .. "unknown dtype " .. tostring(a.dtype)) end
      if type(a.shape) ~= "table" or #a.shape == 0 then return bad(w .. "arrays need a 'shape'") end
      local n, err = dims_of(a, t.sizes)
      if not n then return bad(w .. err) end
      local init = a.init or "uniform"
      if type(init) == "string" then init = { init } end
      if init[1] ~= "uniform" and init[1] ~= "normal" then return bad(w .. "init must be uniform or normal") end
      if init[1] == "uniform" then a.init = { "uniform", init[2] or -1, init[3] or 1 }
      else a.init = { "normal", init[2] or 0, init[3] or 1 } end
    else
      return bad(w .. "kind must be in, out, inout, int or float")
    end
  end
  local has_out = false
  for _, a in ipairs(t.args) do if a.kind == "out" or a.kind == "inout" then has_out = true end end
  if not has_out then return bad(where .. "no out/inout argument: nothing to check") end
  t.test_sizes = t.test_sizes or { t.sizes }
  t.heldout_sizes = t.heldout_sizes or t.test_sizes
  for _, list in ipairs { t.test_sizes, t.heldout_sizes } do
    for _, s in ipairs(list) do
      for _, a in ipairs(t.args) do
        if a.shape then
          local n, err = dims_of(a, s)
          if not n then return bad(where .. "test size: " .. err) end
        end
      end
    end
  end
  t.seeds = t.seeds or { 1, 2 }
  t.heldout_seeds = t.heldout_seeds or { 1001, 1002 }
  t.bench_seed = t.bench_seed or 7
  t.tolerance = t.tolerance or {}
  t.tolerance.atol = t.tolerance.atol or 1e-4
  t.tolerance.rtol = t.tolerance.rtol or 1e-4
  t.timeout = t.timeout or 60
  t.cflags = t.cflags or {}
  local okf, flops = pcall(formula, t.flops, t.sizes)
  local okb, bytes = pcall(formula, t.bytes, t.sizes)
  if not okf then return bad(where .. "flops: " .. tostring(flops)) end
  if not okb then return bad(where .. "bytes: " .. tostring(bytes)) end
  t.flops_spec, t.bytes_spec = t.flops, t.bytes
  t.flops, t.bytes = flops, bytes
  return t
end

--- The C signature of the task's entry, as compiled and shown to models.
function M.signature(task)
  local parts = {}
  for _, a in ipairs(task.args) do
    if a.kind == "int" then parts[#parts + 1] = "int " .. a.name
    elseif a.kind == "float" then parts[#parts + 1] = "float " .. a.name
    elseif a.kind == "in" then parts[#parts + 1] = "const " .. CTYPE[a.dtype] .. " *" .. a.name
    else parts[#parts + 1] = CTYPE[a.dtype] .. " *" .. a.name end
  end
  return "void " .. task.entry .. "(" .. table.concat(parts, ", ") .. ")"
end

function M.detect(dir)
  return fs.exists(dir .. "/task.lua") and fs.exists(dir .. "/reference.c")
end

--- Load a C task directory: task | nil, {kind = "bad_task", message}.
function M.load(dir)
  local src = fs.read(dir .. "/task.lua")
  if not src then return bad("cannot read " .. dir .. "/task.lua") end
  local env = { math = math, string = string, table = table, ipairs = ipairs, pairs = pairs, tostring = tostring }
  local chunk, err = load(src, "@" .. dir .. "/task.lua", "t", env)
  if not chunk then return bad(err) end
  -- the file is code: bounded in CPU time and memory (an endless loop or a
  -- runaway table must end in a clear error, not a hung engine)
  local ok, t = guard.call(dir .. "/task.lua", nil, chunk)
  if not ok then return bad(type(t) == "table" and t.message or (dir .. "/task.lua: " .. tostring(t))) end
  local okv, task, verr = guard.call(dir .. "/task.lua", nil, validate, t, dir)
  if not okv then return bad(type(task) == "table" and task.message or tostring(task)) end
  if not task then return nil, verr end
  local ref = fs.read(dir .. "/reference.c")
  if not ref then return bad("cannot read " .. dir .. "/reference.c") end
  task.target = "c"
  task.dir = dir
  task.candidate_file = "kernel.c"
  task.reference_file = dir .. "/reference.c"
  task.reference = ref
  task.signature = M.signature(task)
  task.language = "c"
  return task
end

-- --------------------------------------------------------------- tunables

--- `// mk:tune NAME v1 v2 ...` lines → { {name=, values={...}}, ... }.
function M.tunables(source)
  if type(source) ~= "string" then error("tunables: source must be a string", 2) end
  local out, seen = {}, {}
  for line in (source .. "\n"):gmatch("([^\n]*)\n") do
    local name, rest = line:match("^%s*//%s*mk:tune%s+([%a_][%w_]*)%s+(.-)%s*$")
    if name and not seen[name] then
      local vals = {}
      for v in rest:gmatch("[^%s,]+") do vals[#vals + 1] = v end
      if #vals > 0 then
        seen[name] = true
        out[#out + 1] = { name = name, values = vals }
      end
    end
  end
  return out
end

-- ---------------------------------------------------------- static screen

-- Calls a kernel has no business making. Caught here for a clear message;
-- the runner's seccomp filter enforces the same at run time.
local FORBIDDEN = {
  { "file I/O", { "fopen", "freopen", "fdopen", "open", "openat", "creat", "opendir", "tmpfile", "remove", "unlink",
    "rename", "mkdir", "rmdir", "truncate", "ftruncate", "chmod", "symlink", "link", "fwrite", "fread" } },
  { "process control", { "fork", "vfork", "execl", "execlp", "execle", "execv", "execvp", "execve", "system", "popen",
    "posix_spawn", "posix_spawnp", "clone", "kill", "exit", "_exit", "_Exit", "quick_exit", "pthread_create",
    "thrd_create", "signal", "sigaction", "ptrace", "prctl", "setrlimit" } },
  { "dynamic loading", { "dlopen", "dlsym", "dlmopen", "dlvsym" } },
  { "raw system calls", { "syscall", "mprotect", "mmap", "munmap", "ioctl" } },
  { "timers", { "clock_gettime", "gettimeofday", "clock", "time", "times", "__rdtsc", "__rdtscp", "_rdtsc", "rdtsc",
    "omp_get_wtime", "getrusage" } },
  { "network", { "socket", "connect", "bind", "listen", "accept", "send", "recv", "sendto", "recvfrom" } },
  { "environment", { "getenv", "setenv", "putenv" } },
}

local function strip_comments_and_strings(s)
  s = s:gsub("/%*.-%*/", " ")
  s = s:gsub("//[^\n]*", "")
  s = s:gsub('"[^"\n]*"', '""')
  return s
end

--- Reasons a source is rejected before compiling, or nil.
function M.screen(source)
  local raw = source
  local s = strip_comments_and_strings(source)
  for _, group in ipairs(FORBIDDEN) do
    for _, fn in ipairs(group[2]) do
      if s:find("%f[%w_]" .. fn:gsub("_", "%%_") .. "%s*%(") then
        return string.format("calls %s() (%s): kernels must only compute on their arguments; "
          .. "file I/O, processes, threads other than OpenMP, dynamic loading, system calls, timers "
          .. "and the network are not allowed", fn, group[1])
      end
    end
  end
  if s:find("constructor") or s:find("destructor") or s:find("init_array") or s:find("fini_array") then
    return "uses constructors/destructors or init sections: code may only run when the entry is called"
  end
  if s:find("%f[%w_]mk_[%w_]*") then
    return "uses an identifier starting with mk_: that prefix is reserved for the harness"
  end
  for inc in raw:gmatch("#%s*include%s*([^\n]*)") do
    if inc:match('^"') then
      return "includes " .. inc .. ": a candidate is one self-contained file; include only system headers (<...>)"
    end
  end
  if raw:find("#%s*embed") or s:find("incbin") then return "embeds external files" end
  return nil
end

-- ---------------------------------------------------------------- processes

local function path_dir(p) return (p:match("^(.*)/[^/]*$")) end

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

local function runner_limits(bytes)
  local mb = math.ceil((bytes or 0) / 1048576)
  return { mem_mb = 2048 + 4 * mb, fsize_mb = 256 + 2 * mb }
end

-- ------------------------------------------------------------------ cases

local function case_list(task, group, meta)
  local cases = {}
  local function add(id, sizes, seed, set)
    cases[#cases + 1] = { id = id, sizes = sizes, seed = seed, group = group, set = set }
  end
  if group == "search" then
    for _, s in ipairs(task.test_sizes) do
      for _, seed in ipairs(task.seeds) do add("search_" .. size_label(task, s) .. "_s" .. seed, s, seed) end
    end
  elseif group == "heldout" then
    for _, s in ipairs(task.heldout_sizes) do
      for _, seed in ipairs(task.heldout_seeds) do add("heldout_" .. size_label(task, s) .. "_s" .. seed, s, seed) end
    end
  elseif group == "bench" then
    local sizes = (meta and meta.bench_sizes) or task.sizes
    for j = 1, (meta and meta.sets or 2) do
      add("bench_" .. size_label(task, sizes) .. "_set" .. j, sizes, task.bench_seed + j - 1, j)
    end
  end
  return cases
end

local function set_bytes(task, sizes)
  local b = 0
  for _, a in ipairs(task.args) do
    if a.shape then b = b + dims_of(a, sizes) * SIZE[a.dtype] end
  end
  return b
end

local function llc_bytes()
  for _, idx in ipairs { 3, 2 } do
    local s = fs.read("/sys/devices/system/cpu/cpu0/cache/index" .. idx .. "/size")
    if s then
      local n, unit = s:match("(%d+)%s*([KMG]?)")
      if n then return tonumber(n) * (unit == "K" and 1024 or unit == "M" and 1048576 or unit == "G" and 1073741824 or 1) end
    end
  end
  return 32 * 1048576
end

-- Plan lines for one case. `inputs`: "gen" (with save under tests_dir) or
-- "file" (frozen inputs).
local function case_plan(task, c, tests_dir, inputs, save_outputs)
  local lines = { "case " .. c.id }
  for _, a in ipairs(task.args) do
    if a.kind == "int" then
      lines[#lines + 1] = string.format("arg int %s %d", a.name, math.tointeger(scalar_value(a, c.sizes)))
    elseif a.kind == "float" then
      lines[#lines + 1] = string.format("arg float %s %.9g", a.name, scalar_value(a, c.sizes))
    else
      local n = dims_of(a, c.sizes)
      local head = string.format("arg %s %s %s %d", a.kind, a.name, SHORT[a.dtype], math.tointeger(n))
      local inrel = "inputs/" .. c.id .. "/" .. a.name .. ".bin"
      if a.kind == "out" then
        if save_outputs then head = head .. " save " .. tests_dir .. "/expected/" .. c.id .. "/" .. a.name .. ".bin" end
      elseif inputs == "fresh" then
        head = head .. string.format(" gen %d %s %.17g %.17g", c.seed, a.init[1], a.init[2], a.init[3])
      elseif inputs == "gen" then
        head = head .. string.format(" gen %d %s %.17g %.17g save %s/%s", c.seed, a.init[1], a.init[2], a.init[3],
          tests_dir, inrel)
      else
        head = head .. " file " .. tests_dir .. "/" .. inrel
      end
      if a.kind == "inout" and save_outputs then
        head = head .. " save " .. tests_dir .. "/expected/" .. c.id .. "/" .. a.name .. ".bin"
      end
      lines[#lines + 1] = head
    end
  end
  lines[#lines + 1] = "end"
  return table.concat(lines, "\n")
end

local function shape_text(a, sizes)
  local _, dims = dims_of(a, sizes)
  local parts = {}
  for i, d in ipairs(dims) do parts[i] = tostring(d) end
  return table.concat(parts, "x")
end

-- ------------------------------------------------------------------ compile

local function glue_source(task)
  local parts = {}
  for i, a in ipairs(task.args) do
    local k = i - 1
    if a.kind == "int" then parts[#parts + 1] = "*(const int *)a[" .. k .. "]"
    elseif a.kind == "float" then parts[#parts + 1] = "*(const float *)a[" .. k .. "]"
    elseif a.kind == "in" then parts[#parts + 1] = "(const " .. CTYPE[a.dtype] .. " *)a[" .. k .. "]"
    else parts[#parts + 1] = "(" .. CTYPE[a.dtype] .. " *)a[" .. k .. "]" end
  end
  return "/* generated by the C target: calls the entry with the runner's argument array */\n"
    .. "void mk_call(void *const *a);\n"
    .. "void mk_call(void *const *a) { " .. task.entry .. "(" .. table.concat(parts, ", ") .. "); }\n"
end

local function proto_source(task)
  return "/* generated by the C target: the entry every candidate must define */\n"
    .. "#include <stdint.h>\n" .. M.signature(task) .. ";\n"
end

-- Compiler output trimmed for a prompt: paths of the private directory
-- removed, at most 40 lines.
local function trim_log(log, workdir)
  log = log:gsub(workdir:gsub("%p", "%%%0") .. "/", "")
  local lines = {}
  for line in log:gmatch("[^\n]+") do
    if #lines >= 40 then lines[#lines + 1] = "..."; break end
    lines[#lines + 1] = line
  end
  return table.concat(lines, "\n")
end

--- Compile a candidate: files = { ["kernel.c"] = source }.
function M.compile(task, files, workdir, opts)
  opts = opts or {}
  if type(task) ~= "table" or type(files) ~= "table" or type(workdir) ~= "string" then
    error("c.compile(task, files, workdir, opts): bad arguments", 2)
  end
  local src = files[task.candidate_file]
  if type(src) ~= "string" then
    return result("compile_error", "no " .. task.candidate_file .. " among the candidate's files", { wall_s = 0 })
  end
  if not opts.trusted then
    local why = M.screen(src)
    if why then return result("rejected", "the kernel " .. why, { wall_s = 0, workdir = workdir }) end
  end
  local okd, derr = fs.mkdirs(workdir)
  if not okd then return result("error", "cannot create the build directory: " .. tostring(derr and derr.message)) end
  workdir = fs.realpath(workdir)
  for name in pairs(files) do
    if not name:match("^[%w_.%-]+$") then
      return result("rejected", "bad file name " .. name)
    end
  end
  -- the machine, not the candidate, fails a write (a full disk): status "error"
  local sources = { ["mk_proto.h"] = proto_source(task), ["mk_glue.c"] = glue_source(task) }
  for name, text in pairs(files) do sources[name] = text end
  for name, text in pairs(sources) do
    local okw, werr = fs.write(workdir .. "/" .. name, text)
    if not okw then return result("error", "cannot write the sources: " .. tostring(werr and werr.message)) end
  end
  fs.remove(workdir .. "/kernel.so")
  local argv = { opts.cc or os.getenv("CC") or "cc", "-O3", "-march=native", "-fopenmp", "-fPIC", "-shared",
    "-include", "mk_proto.h", "-Wl,-z,defs", "-o", "kernel.so" }
  for _, f in ipairs(task.cflags) do argv[#argv + 1] = f end
  local defines = opts.defines or {}
  local names = {}
  for k in pairs(defines) do names[#names + 1] = k end
  table.sort(names)
  for _, k in ipairs(names) do argv[#argv + 1] = "-D" .. k .. "=" .. tostring(defines[k]) end
  argv[#argv + 1] = task.candidate_file
  argv[#argv + 1] = "mk_glue.c"
  argv[#argv + 1] = "-lm"
  local started = task_lib.now()
  local r, err = run_sandboxed(argv, { workdir = workdir, timeout = opts.timeout or 120,
    limits = { mem_mb = 4096, fsize_mb = 512 }, max_output = 1 << 20, cpu = opts.cpu })
  local wall = task_lib.now() - started
  local base = { workdir = workdir, defines = defines, compile_s = wall, wall_s = wall,
    cpu_s = r and r.cpu_s or 0 } -- the compiler's
  if not r then return result("error", "cannot run the compiler: " .. tostring(err and err.message), base) end
  base.log = trim_log((r.stderr or "") .. (r.stdout or ""), workdir)
  if r.status == "timeout" then return result("compile_error", "the compiler took longer than " .. (opts.timeout or 120) .. "s", base) end
  if r.status ~= "exited" or r.code ~= 0 or not fs.exists(workdir .. "/kernel.so") then
    local why = M.machine_failure(r, workdir)
    if why then return result("error", "the compiler could not work: " .. why, base) end
    return result("compile_error", "compilation failed:\n" .. base.log, base)
  end
  base.so = workdir .. "/kernel.so"
  if not opts.trusted then
    local why = M.load_time_code(base.so)
    if why then return result("rejected", "the kernel " .. why, base) end
  end
  return result("ok", "", base)
end

-- A failed compile that is the machine's fault, not the candidate's: the
-- compiler could not be started (exit 126/127), or it reports a full disk
-- and the disk is indeed full (a candidate's `#error No space left on
-- device` alone must not pass for one). Returns the reason or nil.
function M.machine_failure(r, workdir)
  if r.status == "exited" and (r.code == 126 or r.code == 127) then
    return "it could not be started (exit " .. r.code .. "): " .. (r.stderr or ""):match("^[^\n]*")
  end
  local log = (r.stderr or "") .. (r.stdout or "")
  if log:find("No space left on device") or log:find("Disk quota exceeded") then
    local probe = workdir .. "/.mk-space-probe"
    local ok, err = fs.write(probe, string.rep("\0", 1 << 20), { atomic = false })
    fs.remove(probe)
    if not ok then return "the disk is full (" .. tostring(err and err.message) .. ")" end
  end
  return nil
end

--- Code that would run when the shared object is loaded, before the
--- runner's strictest filter: constructors/destructors beyond the
--- compiler's own single entry, or IFUNC resolvers. Returns a reason or nil.
function M.load_time_code(so)
  local r = proc.run { argv = { "readelf", "-SW", "--dyn-syms", so }, timeout = 30, max_output = 4 << 20 }
  if not r or r.status ~= "exited" or r.code ~= 0 then return nil end -- no binutils: the screen still applies
  for _, sec in ipairs { "init_array", "fini_array", "ctors", "dtors", "preinit_array" } do
    local size = r.stdout:match("%s%." .. sec .. "%s+%S+%s+%x+%s+%x+%s+(%x+)")
    if size and tonumber(size, 16) > 8 then
      return "defines code that runs when it is loaded (." .. sec .. "): only the entry may run"
    end
  end
  for line in r.stdout:gmatch("[^\n]+") do
    if line:find("%sIFUNC%s") and not line:find("%sUND%s") then
      return "defines an IFUNC resolver (code that runs when it is loaded): only the entry may run"
    end
  end
  return nil
end

-- ------------------------------------------------------------------ freeze

local function read_meta(tests_dir)
  local s = fs.read(tests_dir .. "/frozen.json")
  return s and cjson.decode(s)
end

-- The checker's opening lines: the manifest (its hash as frozen), the seal
-- of the files' identities when the suite has one, the root.
local function manifest_lines(tests_dir, meta)
  local lines = { "manifest " .. tests_dir .. "/manifest.sha256 " .. meta.manifest_sha }
  if meta.seal_sha then lines[#lines + 1] = "seal " .. tests_dir .. "/manifest.seal " .. meta.seal_sha end
  lines[#lines + 1] = "root " .. tests_dir
  return lines
end

-- acct (optional): its check_s grows by the checker's wall time; cpu
-- (optional): its s by the checker's CPU seconds.
local function checker(plan, acct, cpu)
  local b = M.binaries()
  local t0 = task_lib.now()
  local r, err = proc.run { argv = { b.check }, stdin = plan, timeout = 600, max_output = 64 << 20 }
  if acct then acct.check_s = (acct.check_s or 0) + (task_lib.now() - t0) end
  if not r then return nil, "cannot run mkc-check: " .. tostring(err and err.message) end
  if cpu then cpu.s = cpu.s + (r.cpu_s or 0) end
  local j = cjson.decode(r.stdout or "")
  if not j then return nil, "mkc-check failed: " .. (r.stderr or "") .. (r.stdout or ""):sub(1, 300) end
  return j
end

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

-- --------------------------------------------------------------- test/bench

local function check_outputs(task, tests_dir, meta, blob, outs, cases_by_id, acct, cpu)
  local lines = manifest_lines(tests_dir, meta)
  lines[#lines + 1] = "blob " .. blob
  local args_by_name = {}
  for _, a in ipairs(task.args) do args_by_name[a.name] = a end
  for _, o in ipairs(outs) do
    local a = args_by_name[o.name]
    local c = cases_by_id[o.case]
    lines[#lines + 1] = string.format("cmp %s %s %s %d %d %s expected/%s/%s.bin %.9g %.9g %s", o.case, o.name,
      SHORT[a.dtype], math.tointeger(dims_of(a, c.sizes)), math.tointeger(o.offset), o.hash, o.case, o.name,
      task.tolerance.atol, task.tolerance.rtol, shape_text(a, c.sizes))
  end
  return checker(table.concat(lines, "\n") .. "\n", acct, cpu)
end

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

local function run_runner(task, build, tests_dir, plan_body, nonce_hex, opts, bytes)
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

local probe_reference, check_probes -- defined with the probe check below

local function draw_probes(meta, n, count)
  local probes, base_seed = {}, tonumber(n:sub(1, 7), 16)
  for i = 1, count do probes[i] = { id = "probe" .. i, sizes = meta.bench_sizes, seed = 100000 + base_seed + i } end
  return probes
end

-- The runner's plan of a benchmark and the cases by id. Timed calls: at
-- least min_time s, then on while the median is not known to 2.5%, up to
-- max_time s (targets/c/runner.c, median_settled).
local function bench_plan(task, build, opts, meta, cases, tests_dir, n, blob)
  local min_time = opts.min_time or 0.5
  local plan = { "nonce " .. n, "mode bench", "so " .. build.so, "blob " .. blob,
    string.format("tol %.9g %.9g", task.tolerance.atol, task.tolerance.rtol),
    string.format("bench %d %.6g %d %d %d %.6g", opts.warmup or 3, min_time, opts.min_reps or 5,
      opts.max_reps or 200, math.tointeger(meta.flush_bytes) or 0, opts.max_time or 2 * min_time),
    "counters " .. (opts.counters and 1 or 0) }
  local by_id = {}
  for _, c in ipairs(cases) do
    by_id[c.id] = c
    plan[#plan + 1] = case_plan(task, c, tests_dir, "file", false)
  end
  return plan, by_id
end

-- opts.probe_stock when it was made for this suite and probe count (else
-- discarded): probes whose reference outputs were made ahead.
local function usable_stock(opts, tests_dir)
  local stock = opts.probe_stock
  if stock and (stock.tests_dir ~= tests_dir or #stock.probes ~= (opts.probes or 0)) then
    M.probe_discard(stock)
    return nil
  end
  return stock
end

-- Fresh-input probes added to the plan: seeds drawn now (or, with a stock,
-- drawn when the reference's outputs for them were made ahead), never
-- frozen, never seen before by any candidate. Returns the probes ({} when
-- none are asked for or there is no reference build).
local function add_probes(plan, by_id, task, meta, opts, tests_dir, n, stock)
  if (opts.probes or 0) <= 0 or not fs.exists(tests_dir .. "/.reference/kernel.so") then return {} end
  plan[#plan + 1] = "probes " .. math.tointeger(opts.probes)
  local probes = stock and stock.probes or draw_probes(meta, n, opts.probes)
  for _, c in ipairs(probes) do
    by_id[c.id] = c
    if stock then -- made ahead: mapped from its files
      plan[#plan + 1] = case_plan(task, c, stock.ref.inputs_root, "file", false)
    else
      plan[#plan + 1] = case_plan(task, c, tests_dir, "fresh", false)
    end
  end
  return probes
end

-- The benchmark's record from the runner's answer j.
local function bench_record(j, rproc, wall, stock)
  return { wall_s = wall, reps = math.tointeger(j.reps), sets = math.tointeger(j.sets), times = j.times,
    latency_s = j.median_s, min_s = j.min_s, max_s = j.max_s, p10_s = j.p10_s, p90_s = j.p90_s,
    median_undisturbed_s = j.median_undisturbed_s, undisturbed = math.tointeger(j.clean),
    spread = j.median_s > 0 and (j.p90_s - j.p10_s) / j.median_s or 0, counters = j.counters,
    counters_error = j.counters_error ~= cjson.null and j.counters_error or nil, correct = false, check_s = 0,
    probes_ahead = stock and true or nil, -- the reference's probe outputs were made before this benchmark
    -- the benchmark process's own time: input sets made, the call loop (and in
    -- it the per-call poisoning and output checks), probes, outputs written
    runner = { setup_s = j.setup_s, loop_s = j.loop_s, prep_s = j.prep_s, verify_s = j.verify_s, outs_s = j.outs_s,
      probes_s = j.probes_s, process_s = rproc and rproc.wall_s } }
end

-- The frozen cases' outputs and the probes' outputs of the runner's answer.
local function split_outs(j)
  local frozen, probe = {}, {}
  for _, o in ipairs(j.outs or {}) do
    if o.case:match("^probe") then probe[#probe + 1] = o else frozen[#frozen + 1] = o end
  end
  return frozen, probe
end

-- The verdict on the frozen cases' outputs: a result when they fail, nil when correct.
local function frozen_verdict(task, tests_dir, meta, blob, outs, by_id, base, cpu)
  local cr, cerr = check_outputs(task, tests_dir, meta, blob, outs, by_id, base, cpu)
  if not cr then return result("error", cerr, base) end
  if not cr.ok then return result("error", "check failed: " .. tostring(cr.error), base) end
  for _, x in ipairs(cr.results) do
    if x.tampered then return result("rejected", x.message, base) end
    if not x.ok then return result("incorrect", "at the benchmark size: " .. x.message, base) end
  end
  return nil
end

-- The probes' check as a task beside the frozen outputs' check (one is
-- mostly the reference's run or reading memory, the other reading memory:
-- two processes, one per core). It runs the reference on the probe inputs
-- first unless a stock holds that run; it writes into a record of its
-- own while it runs. Returns a function that awaits it (whatever else
-- failed: its processes and directory must be done with before the
-- benchmark returns) and gives its verdict: a result or nil; check_s is the
-- wall time of the pair, not the sum.
local function start_probe_check(task, tests_dir, meta, blob, probes, outs, j, opts, base, stock)
  local check0, pair0 = base.check_s, task_lib.now()
  local pbase = { check_s = 0 }
  local h = task_lib.spawn(check_probes, task, tests_dir, meta, blob, probes, outs, j, opts, pbase, stock and stock.ref)
  return function()
    if not h then return nil end
    local ok, pr = pcall(task_lib.await, h)
    h = nil
    base.check_s = check0 + (task_lib.now() - pair0)
    base.probe_s, base.probe_cpu_s, base.cpu_per_call_s = pbase.probe_s, pbase.probe_cpu_s, pbase.cpu_per_call_s
    if not ok then return result("error", "probe check failed: " .. tostring(pr), base) end
    return pr and result(pr.status, pr.message, base)
  end
end

--- Benchmark a build at the benchmark size (outputs of timed calls checked).
function M.bench(task, build, opts)
  opts = opts or {}
  if type(build) ~= "table" or build.status ~= "ok" then error("c.bench: build must be a successful compile result", 2) end
  local tests_dir = opts.tests_dir or error("c.bench: opts.tests_dir is required", 2)
  tests_dir = fs.realpath(tests_dir) or tests_dir
  local t0 = task_lib.now()
  local meta = read_meta(tests_dir)
  if not meta then return result("error", "tests are not frozen in " .. tests_dir) end
  local n = nonce()
  local sdir, blob, drop_blob = scratch_blob(opts, build, n, "bench")
  local plan, by_id = bench_plan(task, build, opts, meta, case_list(task, "bench", meta), tests_dir, n, blob)
  local stock = usable_stock(opts, tests_dir)
  local function drop()
    drop_blob()
    if stock then M.probe_discard(stock) end
  end
  local probes = add_probes(plan, by_id, task, meta, opts, tests_dir, n, stock)
  local bytes = meta.per_set_bytes * (meta.sets + 1 + #probes) + meta.flush_bytes
  local st, j, rproc = run_runner(task, build, tests_dir, table.concat(plan, "\n") .. "\n", n,
    { timeout = opts.timeout or 2 * task.timeout, threads = opts.threads, mem_mb = opts.mem_mb, scratch = sdir,
      cpu = opts.cpu, ro = stock and #probes > 0 and { stock.ref.inputs_root .. "/inputs" } or nil }, bytes)
  if st then drop(); st.correct = false; return st end
  local base = bench_record(j, rproc, task_lib.now() - t0, stock)
  if j.bad_calls and j.bad_calls > 0 then
    drop()
    return result("incorrect", "the outputs changed between timed calls on the same inputs (" .. math.tointeger(j.bad_calls)
      .. " of " .. math.tointeger(j.calls) .. " calls): " .. tostring(j.bad)
      .. ". A kernel must do the full work on every call.", base)
  end
  local frozen_outs, probe_outs = split_outs(j)
  local probe_verdict = function() return nil end
  if #probes > 0 then
    probe_verdict = start_probe_check(task, tests_dir, meta, blob, probes, probe_outs, j, opts, base, stock)
  end
  local fr = frozen_verdict(task, tests_dir, meta, blob, frozen_outs, by_id, base, opts.cpu)
  local pr = probe_verdict()
  drop()
  if fr or pr then return fr or pr end
  base.correct = true
  base.wall_s = task_lib.now() - t0
  return result("ok", "", base)
end

-- Fresh-input probes: the reference computes the same inputs (its own
-- sandboxed run), the checker compares, and a kernel much slower on new
-- inputs than on the rotated ones is caching results. nil when all is well.
-- The reference's sandboxed run on the probe inputs, in a scratch
-- directory of its own beside the candidate's blob (the frozen suite,
-- shared by runs, is only read): {r, n, pdir, rblob}.
-- With save_root, the generated inputs are also saved, as
-- save_root/inputs/<case>/<arg>.bin, for the candidate's runner to map.
probe_reference = function(task, tests_dir, meta, blob, probes, opts, save_root)
  local n = nonce()
  local rdir = tests_dir .. "/.reference"
  local pdir = path_dir(blob) .. "/probe-ref-" .. n
  fs.mkdirs(pdir)
  local rblob = pdir .. "/probe.bin"
  local plan = { "nonce " .. n, "mode test", "so " .. rdir .. "/kernel.so", "blob " .. rblob }
  if save_root then plan[#plan + 1] = "trusted 1" end
  for _, c in ipairs(probes) do
    if save_root then
      fs.mkdirs(save_root .. "/inputs/" .. c.id)
      plan[#plan + 1] = case_plan(task, c, save_root, "gen", false)
    else
      plan[#plan + 1] = case_plan(task, c, tests_dir, "fresh", false)
    end
  end
  local bins = M.binaries()
  local r = run_sandboxed({ bins.run }, { workdir = pdir, stdin = table.concat(plan, "\n") .. "\n",
    ro = { path_dir(bins.run), rdir }, rw = save_root and { save_root } or nil, timeout = 2 * task.timeout,
    threads = opts.threads, limits = runner_limits(meta.per_set_bytes * #probes), cpu = opts.cpu })
  return { r = r, n = n, pdir = pdir, rblob = rblob }
end

--- Fresh-input probes made ahead (the evaluator asks while the device
--- would otherwise idle, e.g. while the search waits for the model): seeds
--- drawn now and the reference's run on them done now, its outputs in a
--- directory under opts.dir, which no candidate's sandbox shows. Handed
--- to one later M.bench as opts.probe_stock, which then skips that run.
function M.probe_prepare(task, tests_dir, count, opts)
  opts = opts or {}
  tests_dir = fs.realpath(tests_dir) or tests_dir
  local meta = read_meta(tests_dir)
  if not meta then return nil, "tests are not frozen in " .. tests_dir end
  if not fs.exists(tests_dir .. "/.reference/kernel.so") then return nil, "no reference build" end
  local t0 = task_lib.now()
  local dir = opts.dir or error("c.probe_prepare: opts.dir is required", 2)
  local probes = draw_probes(meta, nonce(), count)
  -- the inputs in a directory of their own, which the candidate's runner
  -- maps read-only; the reference's outputs stay in probe-ref-*, which no
  -- candidate sees
  local inputs_root = dir .. "/probe-in-" .. nonce()
  local ref = probe_reference(task, tests_dir, meta, dir .. "/stock.bin", probes, opts, inputs_root)
  ref.inputs_root = inputs_root
  -- a failed run gives no stock (its inputs may be missing: the candidate's
  -- runner must not fail on them); the benchmark then runs it itself
  local st, rj = classify(ref.r or { status = "exited", code = 1, stdout = "" }, ref.n, 2 * task.timeout)
  if st then
    M.probe_discard { ref = ref }
    return nil, "the reference failed on probe inputs made ahead: " .. st.message
  end
  ref.j = rj
  return { probes = probes, ref = ref, tests_dir = tests_dir, wall_s = task_lib.now() - t0 }
end

--- Remove what probe_prepare made (a stock no benchmark will use).
function M.probe_discard(stock)
  fs.rm_rf(stock.ref.pdir)
  fs.rm_rf(stock.ref.inputs_root)
end

check_probes = function(task, tests_dir, meta, blob, probes, outs, j, opts, base, ref_run)
  local args_by_name = {}
  for _, a in ipairs(task.args) do args_by_name[a.name] = a end
  local nouts = 0
  for _, a in ipairs(task.args) do if a.kind == "out" or a.kind == "inout" then nouts = nouts + 1 end end
  if #outs < #probes * nouts then
    return result("incorrect", "on fresh inputs at the benchmark size the kernel wrote outside its outputs", base)
  end
  if not ref_run then
    local t0 = task_lib.now()
    ref_run = probe_reference(task, tests_dir, meta, blob, probes, opts)
    base.check_s = (base.check_s or 0) + (task_lib.now() - t0)
  end
  if ref_run.error then return result("error", "the reference's probe run failed: " .. ref_run.error, base) end
  local n, pdir, rblob = ref_run.n, ref_run.pdir, ref_run.rblob
  local st, rj = nil, ref_run.j -- parsed already when made ahead
  if not rj then st, rj = classify(ref_run.r or { status = "exited", code = 1, stdout = "" }, n, 2 * task.timeout) end
  if st then fs.rm_rf(pdir); return result("error", "the reference failed on the probe inputs: " .. st.message, base) end
  local ref = {}
  for _, cj in ipairs(rj.cases or {}) do
    for _, o in ipairs(cj.outs or {}) do ref[o.case .. "/" .. o.name] = o end
  end
  local lines = { "blob " .. blob, "blob2 " .. rblob }
  for _, o in ipairs(outs) do
    local a, c, ro = args_by_name[o.name], nil, ref[o.case .. "/" .. o.name]
    for _, p in ipairs(probes) do if p.id == o.case then c = p end end
    if not ro then fs.rm_rf(pdir); return result("error", "no reference output for " .. o.case, base) end
    lines[#lines + 1] = string.format("cmp2 %s %s %s %d %d %s %d:%s %.9g %.9g %s", o.case, o.name, SHORT[a.dtype],
      math.tointeger(dims_of(a, c.sizes)), math.tointeger(o.offset), o.hash, math.tointeger(ro.offset), ro.hash,
      task.tolerance.atol, task.tolerance.rtol, shape_text(a, c.sizes))
  end
  local cr, cerr = checker(table.concat(lines, "\n") .. "\n", base, opts.cpu)
  fs.rm_rf(pdir)
  if not cr then return result("error", cerr, base) end
  if not cr.ok then return result("error", "probe check failed: " .. tostring(cr.error), base) end
  for _, x in ipairs(cr.results) do
    if x.tampered then return result("rejected", x.message, base) end
    if not x.ok then
      return result("incorrect", "on fresh inputs at the benchmark size (never seen before): " .. x.message, base)
    end
  end
  -- one call per probe, so compare CPU time (all threads), which another
  -- process preempting the call does not inflate, with a margin
  local pmin, wmin
  for _, p in ipairs(j.probes or {}) do
    pmin = math.min(pmin or math.huge, p.cpu_s or math.huge)
    wmin = math.min(wmin or math.huge, p.time_s)
  end
  base.probe_s, base.probe_cpu_s, base.cpu_per_call_s = wmin, pmin, j.cpu_per_call_s
  if pmin and j.cpu_per_call_s and pmin > 4 * j.cpu_per_call_s + 2e-3 then
    return result("rejected", string.format("the kernel used %s of CPU on inputs it had never seen but %s per "
      .. "call on the benchmark's repeated inputs: results must be computed on every call, not served from a "
      .. "cache of earlier calls", fmt_s(pmin), fmt_s(j.cpu_per_call_s)), base)
  end
  return nil
end

--- The reference compiled and benchmarked exactly like a candidate.
function M.baseline(task, opts)
  opts = opts or {}
  local tests_dir = opts.tests_dir or error("c.baseline: opts.tests_dir is required", 2)
  local workdir = opts.workdir or (tests_dir .. "/.baseline")
  local b = M.compile(task, { [task.candidate_file] = task.reference }, workdir, { trusted = true })
  if b.status ~= "ok" then return result("error", "the reference does not compile: " .. b.message) end
  local r = M.bench(task, b, opts)
  if r.status ~= "ok" then r.status = "error"; r.message = "the reference failed its own benchmark: " .. r.message end
  return r
end

-- ----------------------------------------------------------------- profile

local function cache_dir()
  local base = os.getenv("MKENGINE_CACHE") or os.getenv("XDG_CACHE_HOME")
    or ((os.getenv("HOME") or "/tmp") .. "/.cache")
  return base .. "/mkengine"
end

local function cpu_model()
  local model = "cpu"
  local f = io.open("/proc/cpuinfo")
  if f then
    local s = f:read("a") or ""
    f:close()
    model = s:match("model name%s*:%s*([^\n]+)") or s:match("CPU part%s*:%s*([^\n]+)") or model
  end
  return model
end

local function cpu_key(threads)
  local host = (fs.read("/etc/hostname") or "host"):gsub("%s", "")
  return (host .. "-" .. cpu_model() .. "-t" .. tostring(threads or "all")):gsub("[^%w%-_.]", "_")
end

local cc_line
local function cc_version()
  if not cc_line then
    local r = proc.run { argv = { os.getenv("CC") or "cc", "--version" }, timeout = 30 }
    cc_line = r and r.status == "exited" and (r.stdout or ""):match("^[^\n]*") or "cc"
  end
  return cc_line
end

-- Frozen suites can be shared through mk.eval.suites: what their bytes
-- follow besides the task is the CPU (the reference is compiled with
-- -march=native), the compiler and the cache size (the input sets).
M.suite_cache = true

--- Machine facts a frozen suite depends on (part of its cache key).
function M.suite_facts(_, opts)
  return { cpu = cpu_model(), cc = cc_version(), llc = (opts and opts.llc_bytes) or llc_bytes(),
    format = "mkc-suite-4" }
end

--- Key of this machine for a baseline measured with `threads` threads.
function M.machine_key(threads) return (cpu_key(threads)) end

--- This machine's measured peaks {gflops, gbps, threads, ...}, cached.
function M.peaks(opts)
  opts = opts or {}
  local path = cache_dir() .. "/peaks-" .. cpu_key(opts.threads) .. ".json"
  if not opts.refresh then
    local s = fs.read(path)
    local j = s and cjson.decode(s)
    if j and j.gflops then return j end
  end
  local bins = M.binaries()
  local argv = { bins.run, "peaks" }
  if opts.threads then argv[3] = tostring(opts.threads) end
  local r = proc.run { argv = argv, timeout = 120 }
  local j = r and r.status == "exited" and cjson.decode(r.stdout or "")
  if not j then return nil, { kind = "peaks", message = "cannot measure peaks: " .. tostring(r and r.stderr) } end
  j.gflops = math.max(j.gflops, j.gflops_1t)
  j.gbps = math.max(j.gbps, j.gbps_1t)
  j.measured_at = os.time()
  fs.mkdirs(cache_dir())
  fs.write(path, cjson.encode(j), { atomic = true })
  return j
end



--- Achieved rates against the machine's peaks, bound, counters, and text.
function M.profile(task, build, opts)
  opts = opts or {}
  local peaks, perr = M.peaks { threads = opts.threads }
  local latency = opts.latency_s
  -- a bench result that already has counters (evaluate asks for them) saves a run
  local b = opts.bench
  if not (b and b.status == "ok" and (b.counters or b.counters_error)) then
    b = M.bench(task, build, { tests_dir = opts.tests_dir, min_time = opts.min_time or 0.2, min_reps = 3,
      max_reps = 50, warmup = 1, counters = true, threads = opts.threads, timeout = opts.timeout, cpu = opts.cpu })
    if b.status ~= "ok" then return b end
  end
  latency = latency or b.latency_s
  local sizes = read_meta(fs.realpath(opts.tests_dir) or opts.tests_dir).bench_sizes
  local flops, bytes = formula(task.flops_spec, sizes), formula(task.bytes_spec, sizes)
  local r = result("ok", "", { latency_s = latency, flops = flops, bytes = bytes, sizes = sizes,
    wall_s = b == opts.bench and 0 or b.wall_s })
  local lines = { string.format("%s at %s: %s per call (median).", task.name, size_label(task, sizes), fmt_s(latency)) }
  if flops then r.gflops = flops / latency * 1e-9 end
  if bytes then r.gbps = bytes / latency * 1e-9 end
  if peaks then
    r.peak_gflops, r.peak_gbps, r.peak_threads = peaks.gflops, peaks.gbps, peaks.threads
    if r.gflops then
      lines[#lines + 1] = string.format("Compute: %.1f GFLOP/s = %.0f%% of the %.0f GFLOP/s FMA peak measured with %d threads.",
        r.gflops, 100 * r.gflops / peaks.gflops, peaks.gflops, peaks.threads)
    end
    if r.gbps then
      lines[#lines + 1] = string.format("Memory: %.1f GB/s = %.0f%% of the %.1f GB/s triad peak.", r.gbps,
        100 * r.gbps / peaks.gbps, peaks.gbps)
    end
    if flops and bytes and bytes > 0 then
      r.intensity = flops / bytes
      r.balance = peaks.gflops / peaks.gbps
      r.bound = r.intensity < r.balance and "memory" or "compute"
      local roof = math.min(peaks.gflops, r.intensity * peaks.gbps)
      r.roof_fraction = r.gflops / roof
      local advice
      if r.bound == "memory" then
        advice = r.roof_fraction > 0.7 and "near the bandwidth roof: only fewer bytes (fusing passes, not re-reading inputs) "
          .. "can help much" or "well below the bandwidth roof: stream contiguously, vectorise, parallelise across rows/cores"
      else
        advice = r.roof_fraction > 0.5 and "near the compute roof: gains need better vector/FMA use or less work"
          or "well below the compute roof: tile for cache/register reuse, vectorise the inner loop, use all cores"
      end
      lines[#lines + 1] = string.format("Arithmetic intensity %.2f flop/byte vs machine balance %.1f: %s-bound; "
        .. "%.0f%% of the roofline (%s).", r.intensity, r.balance, r.bound, 100 * r.roof_fraction, advice)
    end
  else
    r.peaks_error = perr and perr.message
  end
  if b.counters and next(b.counters) then
    local c = b.counters
    r.counters = c
    local parts = {}
    if c.cycles and c.cycles > 0 and c.instructions then
      c.ipc = c.instructions / c.cycles
      parts[#parts + 1] = string.format("IPC %.2f", c.ipc)
    end
    if c.cache_references and c.cache_references > 0 and c.cache_misses then
      c.cache_miss_rate = c.cache_misses / c.cache_references
      parts[#parts + 1] = string.format("last-level cache miss rate %.0f%%", 100 * c.cache_miss_rate)
    end
    if c.l1d_misses and bytes then
      parts[#parts + 1] = string.format("L1D misses %.3g per call (%.2f per 64-byte line of minimum traffic)",
        c.l1d_misses, c.l1d_misses / (bytes / 64))
    end
    if c.branch_misses then parts[#parts + 1] = string.format("branch misses %.3g per call", c.branch_misses) end
    if #parts > 0 then lines[#lines + 1] = "Counters (per call, all threads): " .. table.concat(parts, ", ") .. "." end
  else
    r.counters_message = b.counters_error or "hardware counters unavailable"
    lines[#lines + 1] = "Hardware counters unavailable here (" .. r.counters_message .. ")."
  end
  r.text = table.concat(lines, "\n")
  return r
end

M._internal = { formula = formula, case_list = case_list, classify = classify, sh_quote = sh_quote }

-- ------------------------------------------------------------------ facts

-- ISA extensions worth telling a kernel writer about, in /proc/cpuinfo spelling
local ISA = { "sse4_2", "avx", "avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512vl", "avx512_vnni",
  "avx512_bf16", "avx512_fp16", "amx_tile", "asimd", "sve" }

local machine_facts
-- The machine part of the facts, read once: CPU model, logical CPUs, ISA
-- extensions and cache sizes (Linux /proc and /sys; "unknown" elsewhere).
local function machine()
  if machine_facts then return machine_facts end
  local info = fs.read("/proc/cpuinfo") or ""
  local model = info:match("model name%s*:%s*([^\n]+)") or info:match("Hardware%s*:%s*([^\n]+)") or "unknown"
  local cpus = 0
  for _ in info:gmatch("\nprocessor%s*:") do cpus = cpus + 1 end
  if info:match("^processor%s*:") then cpus = cpus + 1 end
  local flags = " " .. (info:match("\nflags%s*:%s*([^\n]+)") or info:match("\nFeatures%s*:%s*([^\n]+)") or "") .. " "
  local isa = {}
  for _, f in ipairs(ISA) do
    if flags:find(" " .. f .. " ", 1, true) then isa[#isa + 1] = f end
  end
  local caches = {}
  for i = 0, 7 do
    local d = "/sys/devices/system/cpu/cpu0/cache/index" .. i
    local size = fs.read(d .. "/size")
    if not size then break end
    local level, kind = (fs.read(d .. "/level") or "?"):match("%S+"), (fs.read(d .. "/type") or ""):match("%S+")
    local name = "L" .. tostring(level) .. (kind == "Data" and "d" or kind == "Instruction" and "i" or "")
    local shared = (fs.read(d .. "/shared_cpu_list") or ""):match("%S+")
    local by = shared and shared:find("[,-]") and (" (shared by CPUs " .. shared .. ")") or ""
    caches[#caches + 1] = name .. " " .. size:match("%S+") .. by
  end
  machine_facts = {
    model = model, cpus = cpus > 0 and cpus or "unknown",
    isa = #isa > 0 and table.concat(isa, " ") or "unknown",
    caches = #caches > 0 and table.concat(caches, "; ") or "unknown",
  }
  return machine_facts
end

local function sizes_text(s)
  local names = {}
  for k in pairs(s or {}) do names[#names + 1] = k end
  table.sort(names)
  local parts = {}
  for _, k in ipairs(names) do parts[#parts + 1] = k .. "=" .. tostring(math.tointeger(s[k]) or s[k]) end
  return "{" .. table.concat(parts, ", ") .. "}"
end

--- Facts for the prompts ({label, value} list): the CPU, its ISA
--- extensions and caches, and the task's benchmark and test sizes.
---@param task table
---@return table
function M.facts(task, _)
  local m = machine()
  local tests = {}
  for _, s in ipairs(task.test_sizes or {}) do tests[#tests + 1] = sizes_text(s) end
  return {
    { "CPU", m.model },
    { "logical CPUs", m.cpus },
    { "ISA extensions (-march=native enables them)", m.isa },
    { "caches (per core unless shared)", m.caches },
    { "benchmark size (timed)", sizes_text(task.sizes) },
    { "test sizes (correctness)", #tests > 0 and table.concat(tests, " ") or "the benchmark size" },
  }
end

return M
