--- targets/pallas/profile.lua: a build's cost_analysis FLOPs and bytes,
--- achieved rates against the chip's peaks and the bound, from the
--- harness's `profile` step (the baseline's answer carries the same).
local need, M, call = ...
local args = need "args"
local device_harness = call.device
local candidate_args, sandbox_for, visible_inputs, timing_args = args.candidate, args.sandbox, args.visible_inputs,
  args.timing

local P = {}

-- A harness answer's profile as the target's profile result.
function P.result(r)
  local p = r.profile or {}
  local function g(x) return x and x / 1e9 or nil end
  return {
    status = r.status, text = r.text or "", message = r.message or "",
    gflops = g(p.achieved_flops), gbps = g(p.achieved_bytes_per_s),
    peak_gflops = g(p.peak_flops), peak_gbps = g(p.peak_bytes_per_s),
    intensity = p.intensity, bound = p.bound, chip = p.chip,
    flops = p.flops, bytes = p.bytes, flops_source = p.flops_source, bytes_source = p.bytes_source,
    latency_s = r.latency_s, counters = nil, timing_kind = r.timing,
    counters_message = "no hardware counters for the Pallas target; use XProf for per-op detail",
    wall_s = r.wall_s, device = r.device_info,
  }
end
local profile_result = P.result

--- cost_analysis FLOPs/bytes, achieved rates vs the chip's peaks, bound.
---@param task table
---@param build table
---@param opts? {tests_dir?: string, latency_s?: number, timeout?: number, interpret?: boolean}
---@return table {status, text, gflops, gbps, peak_gflops, peak_gbps, intensity, bound, message}
function M.profile(task, build, opts)
  opts = opts or {}
  if build.status ~= "ok" then return { status = build.status, text = "", message = build.message } end
  if build.sampled then
    return { status = "unavailable", text = "no profile: the kernel runs only at the task's own sizes, sampled",
      message = "" }
  end
  local extra = timing_args(opts, nil, build.timing_kind == "interpret")
  local tests_dir = build.scaled_tests or opts.tests_dir
  if tests_dir then extra[#extra + 1] = "--tests"; extra[#extra + 1] = tests_dir end
  if opts.latency_s then extra[#extra + 1] = "--latency-s"; extra[#extra + 1] = string.format("%.17g", opts.latency_s) end
  local r = device_harness("profile", candidate_args(task, build, extra, opts), {
    timeout = opts.timeout or task.timeout, cwd = build.workdir, cpu = opts.cpu, build = build, mem_mb = opts.mem_mb,
    sandbox = sandbox_for(task, build.workdir, opts, tests_dir and visible_inputs(tests_dir) or nil),
  })
  return profile_result(r)
end

return P
