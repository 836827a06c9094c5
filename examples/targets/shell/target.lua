--- examples/targets/shell/target.lua: a tiny target, the example of
--- docs/targets/writing-a-target.md. A candidate is a POSIX shell script
--- (`kernel.sh`) that reads integers on stdin and prints one line.
--- harness.sh runs it inside the sandbox on the frozen inputs; the outputs
--- are compared with the frozen expected outputs outside the sandbox, so
--- candidate code never sees them.
local fs = require "mk.fs"
local proc = require "mk.proc"
local sandbox = require "mk.services.sandbox"

local M = { name = "shell" }

local CASES = 4 -- per group (search, heldout)

local function bad(msg) return nil, { kind = "bad_task", message = msg } end

-- Integers of one test case, from a seeded generator (same seed, same case).
local function numbers(seed, n)
  local s, out = seed, {}
  for i = 1, n do
    s = (s * 1103515245 + 12345) % 2147483648
    out[i] = s % 1000
  end
  return table.concat(out, "\n") .. "\n"
end

-- Run harness.sh; with `build`, inside the sandbox of that build.
local function harness(args, build, ro)
  local argv = { "sh", M.dir .. "/harness.sh" }
  for _, a in ipairs(args) do argv[#argv + 1] = a end
  local box = build and { workdir = build.workdir, ro = ro } or nil
  -- sandbox.apply turns the `sandbox` field into a bubblewrap command line
  return proc.run(sandbox.apply { argv = argv, timeout = 20, limits = { mem_mb = 512 }, sandbox = box })
end

-- A result for a process that did not finish well, or nil.
local function failed(r, err)
  if not r then return { status = "error", message = err.message } end
  if r.status == "timeout" then return { status = "timeout", message = "the kernel ran past 20 s" } end
  if r.status ~= "exited" or r.code ~= 0 then
    return { status = "crash", message = (r.stdout .. r.stderr):sub(1, 2000) }
  end
end

function M.detect() return false end -- a task names this target in its task.lua

function M.load(dir)
  local chunk, err = loadfile(dir .. "/task.lua", "t", {})
  if not chunk then return bad(err) end
  local ok, spec = pcall(chunk)
  if not ok or type(spec) ~= "table" then return bad(dir .. "/task.lua: " .. (ok and "must return a table" or spec)) end
  local ref = fs.read(dir .. "/reference.sh")
  if not ref then return bad(dir .. "/reference.sh is missing") end
  return {
    name = spec.name or dir:match("([^/]+)/*$"), target = "shell", description = spec.description or "",
    dir = dir, candidate_file = "kernel.sh", reference = ref, seed = spec.seed or 1,
    signature = "stdin: integers, one per line; stdout: one line", tolerance = { atol = 0, rtol = 0 },
  }
end

function M.compile(task, files, workdir)
  local src = files[task.candidate_file]
  if type(src) ~= "string" then error("shell.compile: files must hold " .. task.candidate_file, 2) end
  fs.mkdirs(workdir)
  local script = workdir .. "/" .. task.candidate_file
  fs.write(script, src)
  local r = assert(proc.run { argv = { "sh", "-n", script }, timeout = 10 }) -- a syntax check is our compiler
  if r.code ~= 0 then return { status = "compile_error", message = r.stderr, log = r.stderr, wall_s = r.wall_s } end
  return { status = "ok", message = "", workdir = workdir, script = script, wall_s = r.wall_s }
end

function M.freeze(task, tests_dir)
  if fs.exists(tests_dir .. "/frozen") then return { status = "ok", fresh = false, cases = 2 * CASES, message = "" } end
  local ref = M.compile(task, { [task.candidate_file] = task.reference }, tests_dir .. "/reference")
  if ref.status ~= "ok" then return { status = "error", message = "the reference: " .. ref.message } end
  for g, group in ipairs { "search", "heldout" } do
    local dir = tests_dir .. "/" .. group
    fs.mkdirs(dir .. "/in")
    for i = 1, CASES do fs.write(("%s/in/%d.in"):format(dir, i), numbers(task.seed * 100 + g * 10 + i, 10 * i)) end
    local bad_run = failed(harness({ "run", ref.script, dir .. "/in", dir .. "/want" }))
    if bad_run then return { status = "error", message = "the reference: " .. bad_run.message } end
  end
  fs.write(tests_dir .. "/bench.in", numbers(task.seed, 200))
  fs.write(tests_dir .. "/frozen", "")
  return { status = "ok", fresh = true, cases = 2 * CASES, message = "" }
end

function M.test(_, build, tests_dir, opts)
  local group = opts and opts.group or "search"
  local dir, out = tests_dir .. "/" .. group, build.workdir .. "/out-" .. group
  local r, err = harness({ "run", build.script, dir .. "/in", out }, build, { dir .. "/in", M.dir })
  local bad_run = failed(r, err)
  if bad_run then
    bad_run.correct, bad_run.wall_s = false, r and r.wall_s or 0
    return bad_run
  end
  local c = assert(harness { "check", out, dir .. "/want" })
  local ok = c.code == 0
  return { status = ok and "ok" or "incorrect", correct = ok, message = ok and "" or c.stdout, wall_s = r.wall_s }
end

function M.bench(_, build, opts)
  local reps = 20
  local input = opts.tests_dir .. "/bench.in"
  local r, err = harness({ "time", build.script, input, tostring(reps) }, build, { input, M.dir })
  local bad_run = failed(r, err)
  if bad_run then return bad_run end
  local latency = tonumber(r.stdout) / 1e9 / reps
  return { status = "ok", correct = true, latency_s = latency, spread = 0, reps = reps, message = "", wall_s = r.wall_s }
end

function M.baseline(task, opts)
  local ref = M.compile(task, { [task.candidate_file] = task.reference }, opts.workdir)
  return M.bench(task, ref, opts)
end

function M.profile(_, _, opts)
  return { status = "ok", text = string.format("%.3f ms per call", opts.latency_s * 1e3), message = "" }
end

function M.tunables() return {} end

return M
