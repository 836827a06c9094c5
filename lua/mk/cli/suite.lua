--- mkengine suite check DIR: the first command to run on a new benchmark.
--- Every task of DIR is loaded, frozen (its test scale chosen) and its own
--- reference evaluated as a candidate through the same path as
--- `mkengine eval`, each under a time and memory limit; one line per task
--- and a total.
local cli = require "mk.cli"
local fs = require "mk.fs"
local eval = require "mk.eval"
local targets = require "mk.eval.targets"
local task_lib = require "mk.services.task"

local M = {
  summary = "check a benchmark: freeze every task and evaluate its reference as a candidate",
  usage = "usage: mkengine suite check DIR [--time-limit S] [--mem-limit MB] [--fresh] [--bench] [--only PATTERN] "
    .. "[--json]",
  help = [[
For every task directory in DIR (sorted by name): load it, freeze its tests
(on a CPU the test scale is chosen by running the reference: see
docs/targets/pallas.md, "Test scale"), then evaluate the task's reference
file as a candidate: compiled and checked on the search and held-out tests
(--bench: the whole path of `mkengine eval`, with the benchmark against the
baseline; no tuning, no profile). Prints one line per task:

  TASK  STATUS  SCALE  SECONDS  PEAK_MB  [message]

STATUS is the evaluation's verdict (ok, incorrect, compile_error, ...), or
`error` when the task could not be loaded or frozen and `limit` when it
ran past --time-limit or --mem-limit; an `ok` whose freeze warned (an
output that is constant or ignores an input at every scale tried, cases
dropped for time) shows the first warning as its message. SCALE is `1/F` when the task's sizes
were divided by F for the tests, `1/Fw` when only its widths were (heads,
head and hidden dimensions, channels), `own` for its own sizes. PEAK_MB is the
largest resident memory of one of its harness processes (Pallas target).

  --time-limit S   seconds per task (default 300)
  --mem-limit MB   resident memory of each harness process (default 4096)
  --fresh          freeze anew in a temporary directory (no suite cache)
  --bench          also time it against the baseline, as `mkengine eval` does
  --only PATTERN   only the tasks whose name matches the Lua pattern
  --json           one JSON object per task, then the total

Exit status: 0 when every task's reference passed, 1 when one did not, 2 on
a bad directory or option.]],
}

local function task_dirs(dir, only)
  local out = {}
  for _, name in ipairs(fs.list(dir) or {}) do
    local p = dir .. "/" .. name
    if name:sub(1, 1) ~= "." and fs.isdir(p) and (not only or name:match(only)) then out[#out + 1] = name end
  end
  table.sort(out)
  return out
end

-- The reference's source, named as the candidate file of the task.
local function reference_files(task)
  local src = task.reference
  if type(src) ~= "string" or src == "" then return nil end
  return { [task.candidate_file] = src }
end

local function scale_text(ts)
  if type(ts) ~= "table" or not ts.factor then return "-" end
  local f = math.tointeger(ts.factor) or ts.factor
  local w = ts.tier == "widths" and "w" or "" -- only the width sizes were divided
  return f == 1 and "own" or ("1/" .. tostring(f) .. w)
end

-- The verdict on the reference as a candidate: tested on the frozen search
-- cases, then on the held-out ones, through the target. The target's run
-- step compiles it and reports a compile error as compile_error, so no
-- separate compile step runs (it would cost one more process per task).
local function correctness(ev, files)
  local task, target = ev.task, ev.target
  local wd = ev.root .. "/reference"
  assert(fs.mkdirs(wd))
  for name, src in pairs(files) do assert(fs.write(wd .. "/" .. name, src)) end
  local build = { status = "ok", workdir = wd, candidate = wd .. "/" .. task.candidate_file, defines = {},
    mem_mb = ev.mem_mb }
  if target.name ~= "pallas" then -- other targets test what their compile built
    build = target.compile(task, files, wd, { tests_dir = ev.tests_dir })
    if build.status ~= "ok" then return { status = build.status, message = build.message } end
  end
  local r = target.test(task, build, ev.tests_dir, { group = "search" })
  if r.status ~= "ok" then return r end
  local h = target.test(task, build, ev.tests_dir, { group = "heldout", confirm = ev.opts.confirm })
  if h.status ~= "ok" then h.message = "held-out tests: " .. tostring(h.message) end
  return h
end

-- The whole path of `mkengine eval` (benchmark and baseline included).
local function full_eval(ev, files)
  local res = ev:evaluate(files, { tune = false, profile = false })
  if res.correct then
    local h = ev:heldout(files)
    if not h.correct then res.status, res.message = h.status, "held-out tests: " .. tostring(h.message) end
  end
  return res
end

-- Evaluate the reference of the loaded `task` as a candidate: the result
-- ({status, message}) and the frozen suite's test scale.
local function evaluate(task, opts)
  local ev = eval.new(task, {
    suite_cache = not opts.fresh, baseline_cache = not opts.fresh, probe_stock = false,
    confirm = false, -- the reference is right at every scale: a larger one is not re-checked
    plain_ok = true, -- ... and is plain JAX
    timeout = opts.time_limit, mem_mb = opts.mem_limit,
  })
  local files = reference_files(task)
  local ok, r = pcall(function()
    if not files then return { status = "error", message = "the task has no reference source" } end
    ev:freeze()
    return (opts.bench and full_eval or correctness)(ev, files)
  end)
  local scale = ev.frozen and ev.frozen.test_scale
  local warnings = ev.frozen and type(ev.frozen.warnings) == "table" and ev.frozen.warnings or {}
  ev:close()
  if not ok then
    if r == task_lib.CANCELLED then error(r, 0) end
    return { status = "error", message = type(r) == "table" and r.message or tostring(r) }, scale, warnings
  end
  return r, scale, warnings
end

-- One task: {name, status, scale, seconds, peak_mb, message}.
local function check_one(dir, name, opts, peak)
  local t0 = task_lib.now()
  peak.mb = 0
  local line = { name = name }
  local task, err = targets.load_task(dir .. "/" .. name)
  if not task then
    line.status, line.message = "error", "cannot load: " .. tostring(err and err.message)
  else
    local done, r, scale, warnings = task_lib.timeout(opts.time_limit, evaluate, task, opts)
    if not done then
      line.status, line.message = "limit", string.format("ran past the time limit of %gs", opts.time_limit)
    else
      line.status, line.message, line.scale, line.warnings = r.status, r.message, scale, warnings
      if r.kind == "memory_limit" or r.kind == "time_limit" or tostring(r.message):find("over its limit", 1, true)
          or tostring(r.message):find("past its limit", 1, true) then
        line.status = "limit"
      end
    end
  end
  line.seconds = task_lib.now() - t0
  line.peak_mb = peak.mb > 0 and peak.mb or nil
  return line
end

local function first_line(s)
  s = tostring(s or ""):gsub("^%s+", "")
  return (s:match("^[^\n]*") or ""):sub(1, 160)
end

local function print_line(l, json)
  if json then
    io.stdout:write(cli.json { task = l.name, status = l.status, scale = l.scale, seconds = l.seconds,
      peak_mb = l.peak_mb, message = l.message, warnings = l.warnings }, "\n")
  else
    local warn = l.warnings and l.warnings[1] -- an ok whose tests cannot tell every wrong kernel says so
    io.stdout:write(string.format("%-52s %-13s %-6s %7.1f %7s  %s\n", l.name, l.status, scale_text(l.scale),
      l.seconds, l.peak_mb and string.format("%.0f", l.peak_mb) or "-",
      l.status ~= "ok" and first_line(l.message) or warn and ("warning: " .. first_line(warn)) or ""))
  end
  io.stdout:flush()
end

local function print_total(lines, json)
  local counts, secs, peak, ok = {}, 0, 0, 0
  for _, l in ipairs(lines) do
    counts[l.status] = (counts[l.status] or 0) + 1
    secs = secs + l.seconds
    peak = math.max(peak, l.peak_mb or 0)
    if l.status == "ok" then ok = ok + 1 end
  end
  if json then
    io.stdout:write(cli.json { total = #lines, ok = ok, statuses = counts, seconds = secs, max_peak_mb = peak }, "\n")
    return ok
  end
  local parts = {}
  for k, v in pairs(counts) do if k ~= "ok" then parts[#parts + 1] = v .. " " .. k end end
  table.sort(parts)
  io.stdout:write(string.format("total: %d/%d ok%s; %.0f s; largest peak %.0f MB\n", ok, #lines,
    #parts > 0 and (", " .. table.concat(parts, ", ")) or "", secs, peak))
  return ok
end

-- Harness limits and the peak-memory observer, for targets that have them.
local function instrument(opts, peak)
  local pallas = targets.get("pallas")
  local env = {}
  for k, v in pairs(pallas.env or {}) do env[k] = v end
  env.MK_PALLAS_MEM_MB = tostring(math.tointeger(opts.mem_limit) or opts.mem_limit)
  env.MK_PALLAS_TIME_S = tostring(opts.time_limit)
  pallas.env = env
  local prev = pallas.on_result
  pallas.on_result = function(sub, v)
    if type(v.peak_rss_mb) == "number" then peak.mb = math.max(peak.mb, v.peak_rss_mb) end
    if prev then prev(sub, v) end
  end
end

local function check(args)
  local opts, pos = cli.parse(args, {
    flags = { fresh = true, json = true, bench = true },
    options = { time_limit = "number", mem_limit = "number", only = "string" },
  }, M.usage)
  if #pos ~= 1 then cli.usage_error("expected one benchmark directory", M.usage) end
  local dir = pos[1]:gsub("/+$", "")
  if not fs.isdir(dir) then cli.input_error("not a directory: " .. dir) end
  opts.time_limit = opts.time_limit or 300
  opts.mem_limit = opts.mem_limit or 4096
  if opts.time_limit <= 0 or opts.mem_limit <= 0 then cli.usage_error("limits must be positive", M.usage) end
  local names = task_dirs(dir, opts.only)
  if #names == 0 then cli.input_error("no task directories in " .. dir) end
  local peak = { mb = 0 }
  instrument(opts, peak)
  local lines = {}
  for _, name in ipairs(names) do
    lines[#lines + 1] = check_one(dir, name, opts, peak)
    print_line(lines[#lines], opts.json)
  end
  targets.get("pallas").release()
  return print_total(lines, opts.json) == #lines and 0 or 1
end

function M.run(args)
  local sub = args[1]
  if args[2] == "--help" or args[2] == "-h" then
    io.stdout:write(M.usage, "\n\n", M.help, "\n")
    return 0
  end
  if sub ~= "check" then cli.usage_error(sub and ("unknown subcommand '" .. sub .. "'") or "expected a subcommand",
    M.usage) end
  return check({ table.unpack(args, 2) })
end

return M
