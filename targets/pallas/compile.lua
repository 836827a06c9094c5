--- targets/pallas/compile.lua: a candidate compiled by the harness's
--- `compile` step (jax.jit(...).lower().compile(), escalated to a larger
--- scale when the test scale is too small for its blocks), rejected when
--- its work is plain JAX rather than Pallas kernels (not_a_kernel), and the
--- tunables it declares (`# mk:tune` lines, mirroring
--- harness.parse_tunables).
local need, M, call = ...
local fs = require "mk.fs"
local args = need "args"
local device_harness = call.device
local candidate_args, sandbox_for, visible_inputs = args.candidate, args.sandbox, args.visible_inputs

-- what a compile answer hands on to the build as it is
-- (reason: why a build is unchecked, e.g. "memory": its harness process went past the limit)
local BUILD_FIELDS = { "status", "message", "phase", "kind", "reason", "compile_s", "lower_s", "wall_s", "device",
  "interpret", "work" }

--- Write the candidate files into workdir and compile (jax.jit(...).lower()
--- then .compile()). opts.defines = tunable values; opts.tests_dir gives
--- the input shapes (else the reference's inputs are built).
---@param task table
---@param files table {[filename] = source}
---@param workdir string
---@param opts? {defines?: table, tests_dir?: string, timeout?: number, interpret?: boolean, sandbox?: boolean, mem_mb?: number}
---@return table build
function M.compile(task, files, workdir, opts)
  opts = opts or {}
  if type(files) ~= "table" or type(files[task.candidate_file]) ~= "string" then
    error("pallas.compile: files must contain " .. task.candidate_file, 2)
  end
  fs.mkdirs(workdir)
  for name, src in pairs(files) do
    if name:find("/", 1, true) or name:sub(1, 1) == "." then error("pallas.compile: bad file name " .. name, 2) end
    assert(fs.write(workdir .. "/" .. name, src))
  end
  -- mem_mb: each of its harness processes' memory limit (MiB), for every later step of it too
  local build = { workdir = workdir, candidate = workdir .. "/" .. task.candidate_file, defines = opts.defines or {},
    mem_mb = opts.mem_mb }
  -- Input shapes come from the frozen tests (opts.tests_dir, else the ones
  -- freeze last verified for this task); without them the harness builds
  -- the reference's inputs.
  local tests_dir = opts.tests_dir or task.tests_dir
  local function step(dir)
    return device_harness("compile", candidate_args(task, build, dir and { "--tests", dir } or {}, opts), {
      timeout = opts.timeout or task.timeout, cwd = workdir, cpu = opts.cpu, build = build,
      sandbox = sandbox_for(task, workdir, opts, dir and visible_inputs(dir) or nil),
    })
  end
  local r, used = step(tests_dir), tests_dir
  if tests_dir and r.status == "rescale" then r, used = M.escalate(task, tests_dir, function(d)
    return d == tests_dir and r or step(d) end, nil, { mem_mb = build.mem_mb, cpu = opts.cpu }) end
  if used ~= tests_dir then build.scaled_tests, build.base_tests = used, tests_dir end
  if tests_dir and r.status == "unchecked" then -- no scale this CPU can test: the task's own sizes, sampled
    r = M.sampled_instead(task, build, tests_dir, r, opts)
    if build.sampled then build.scaled_tests, build.base_tests = nil, nil end
  end
  build.scale_note, build.checked_at = r.scale_note, r.checked_at
  for _, k in ipairs(BUILD_FIELDS) do build[k] = r[k] end
  build.log, build.timing_kind = r.stderr or build.log, r.timing
  local why = build.status == "ok" and M.not_a_kernel(r.work, task, opts)
  if why then build.status, build.kind, build.message = "rejected", "plain_jax", "kernel.py is no Pallas kernel: " .. why end
  return build
end

--- The Pallas target judges Pallas kernels: a candidate whose work is done
--- by plain JAX (the reference's code in disguise, a matmul left to XLA
--- behind a Pallas epilogue, a fallback taken "off TPU", which the CPU is)
--- would be timed and ranked as one. Its compile step counts the work of
--- the traced workload inside and outside its pallas_calls, in the units
--- the freeze counted the reference's (harness jaxpr_work). Rejected:
--- no pallas_call traced, or a plain-JAX part doing at least
--- M.defaults.plain_work_limit of the reference's work. A task (task.plain_ok)
--- or an evaluator (opts.plain_ok: the reference checked as a candidate)
--- may allow plain JAX.
M.defaults.plain_work_limit = 0.8

--- Why a compile step's work split (`work`: {plain, pallas, calls, top,
--- reference}) is no Pallas kernel, or nil.
function M.not_a_kernel(work, task, opts)
  if type(work) ~= "table" or task.plain_ok or (opts and opts.plain_ok) then return nil end
  if (math.tointeger(work.calls) or 0) == 0 then
    return "no pallas_call runs: its workload traced to plain JAX alone (a fallback taken off a TPU is no " ..
      "exception: this target judges the Pallas kernels a TPU would run)"
  end
  local plain, ref = tonumber(work.plain) or 0, tonumber(work.reference)
  if not ref or ref <= 0 or plain < M.defaults.plain_work_limit * ref then return nil end
  local top = {}
  for name, w in pairs(type(work.top) == "table" and work.top or {}) do top[#top + 1] = { name = name, w = w } end
  table.sort(top, function(a, b) return a.w > b.w end)
  for i, x in ipairs(top) do top[i] = string.format("%s %.0f%%", x.name, 100 * x.w / ref) end
  return string.format("its plain-JAX part, outside every pallas_call, does %.0f%% as much work as the whole " ..
    "reference (%s), its Pallas kernels %.0f%%: the work must be done by Pallas kernels", 100 * plain / ref,
    #top > 0 and table.concat(top, ", ") or "?", 100 * (tonumber(work.pallas) or 0) / ref)
end

local function parse_value(s)
  s = s:match("^%s*(.-)%s*$")
  if s == "" then return nil end
  local q = s:match('^"(.*)"$') or s:match("^'(.*)'$")
  if q then return q end
  if s == "True" or s == "true" then return true end
  if s == "False" or s == "false" then return false end
  local n = tonumber(s)
  if n then return math.tointeger(n) or n end
  return s
end

--- Tunables declared in a candidate: `# mk:tune block_m = [128, 256]`
--- (also `# mk:tune NAME v1 v2`). Raises on a malformed or duplicate line.
---@param source string
---@return table list of {name =, values = {...}}
function M.tunables(source)
  if type(source) ~= "string" then error("pallas.tunables: source must be a string", 2) end
  local out, seen, lineno = {}, {}, 0
  for line in (source .. "\n"):gmatch("([^\n]*)\n") do
    lineno = lineno + 1
    local name, rest = line:match("^%s*#%s*mk:tune%s+([%a_][%w_]*)%s*(.-)%s*$")
    if not name then name, rest = line:match("^%s*//%s*mk:tune%s+([%a_][%w_]*)%s*(.-)%s*$") end
    if name then
      local values = {}
      if rest:sub(1, 1) == "=" then
        local body = rest:sub(2):match("^%s*(.-)%s*$")
        local inner = body:match("^%[(.*)%]$") or body:match("^%((.*)%)$")
        if not inner then
          error(string.format("pallas.tunables: line %d: values of %s must be a [list]", lineno, name), 2)
        end
        for item in (inner .. ","):gmatch("([^,]*),") do
          local v = parse_value(item)
          if v ~= nil then values[#values + 1] = v end
        end
      else
        for item in rest:gsub(",", " "):gmatch("%S+") do values[#values + 1] = parse_value(item) end
      end
      if #values == 0 then error(string.format("pallas.tunables: line %d: %s has no values", lineno, name), 2) end
      if seen[name] then error(string.format("pallas.tunables: line %d: %s declared twice", lineno, name), 2) end
      seen[name] = true
      out[#out + 1] = { name = name, values = values }
    end
  end
  return out
end
