--- targets/c/profile.lua: a build's achieved rates against this
--- machine's measured peaks (FMA and triad, by mkc-run, cached): compute
--- and memory roofs, the bound, hardware counters, and advice in words.
local need, M = ...
local fs = require("mk.fs")
local proc = require("mk.proc")
local cjson = require("cjson.safe")
local util = require("mk.services.util")
local task_mod = need "task"
local formula, size_label = task_mod.formula, task_mod.size_label
local result = need("runner").result
local read_meta = need("suite").read_meta
local cpu_key = need("machine").cpu_key
local fmt_s = util.fmt_s

local function cache_dir()
  local base = os.getenv("MKENGINE_CACHE") or os.getenv("XDG_CACHE_HOME")
    or ((os.getenv("HOME") or "/tmp") .. "/.cache")
  return base .. "/mkengine"
end

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
