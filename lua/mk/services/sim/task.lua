--- mk.services.sim.task: a simulated task, its parameters and the law of
--- the simulated device. A sim task is a folder with a `task.lua` returning
--- its parameters (target = "sim"); every parameter not given takes the
--- default below. The law turns a kernel's state (mk.services.sim.kernel)
--- into its speedup over the baseline:
---
---   Q        = sum of the weights of the task's useful optimisations the
---              kernel applies cleanly, minus `botch_cost` per botched one
---              and `useless_cost` per optimisation the task has no use for
---   core     = naive * (headroom / tune.gain / naive) ^ clamp(Q, -1, 1)
---   tuned    = tune.gain ^ (1 - min(1, |log2(block / tune.best)| / 2))
---   speedup  = core * tuned
---
--- so a kernel with every useful optimisation and the best block reaches
--- `headroom`, one with none runs at `naive` (XLA is a good compiler), and
--- every measurement draws log-normal noise around it (`noise`, with a
--- share of disturbed runs, `outliers`). docs/simulator.md documents each
--- parameter and what the simulation cannot tell.
local kernel = require("mk.services.sim.kernel")
local rng = require("mk.services.rng")

local M = {}

--- Every parameter of a sim task and its default.
M.DEFAULTS = {
  baseline_ms = 1.0,     -- the XLA baseline's latency, ms
  noise = 0.02,          -- sigma of log latency per benchmark (device noise)
  outliers = 0.02,       -- share of benchmarks disturbed by 10-30 %
  headroom = 1.5,        -- best speedup over the baseline: all useful optimisations, best block
  naive = 0.7,           -- speedup of a correct kernel with no optimisation
  compile = 0.3,         -- P(a fresh kernel compiles)
  correct = 0.6,         -- P(a fresh kernel that compiles gives right results)
  fix = 0.5,             -- P(a fix repairs the error it is shown)
  fix_new = 0.08,        -- P(a fix adds another compile error)
  break_compile = 0.2,   -- P(a change of complexity 1 adds a compile error; x complexity 1-3)
  break_correct = 0.05,  -- P(a change of complexity 1 makes results wrong; x complexity)
  crash = 0.03,          -- P(a change adds an out-of-bounds crash)
  heldout = 0.004,       -- P(a change is wrong only on held-out shapes)
  botch = 0.12,          -- P(an optimisation is implemented badly)
  botch_cost = 0.15,     -- quality a botched optimisation costs
  useless_cost = 0.03,   -- quality an optimisation the task has no use for costs (overhead)
  insight = 0.4,         -- P(a plan with no hint or direction picks a useful optimisation)
  hint = 0.5,            -- P(a plan follows the bottleneck the profile names)
  direction = 0.6,       -- P(a plan follows the direction it was given (beam))
  prior_opt = 0.35,      -- P(a fresh kernel applies each useful optimisation)
  profile_truth = 0.6,   -- P(the profile names the most valuable missing optimisation)
  profile_read = 0.9,    -- P(the profile agent passes the profile's bottleneck on)
  tune_good = 0.8,       -- P(the tune agent's values include the best block)
  run_sd = 0.3,          -- sigma of the run's form: one log-normal factor per run seed (shared by all
                         -- tasks) on the odds of success (M.for_run), so repeats differ as a whole
  size = 2000,           -- tokens of the real kernel a state stands for
  opts = { tile_grid = 1 }, -- the useful optimisations and their weights (normalised to sum 1)
  tune = { best = 512, gain = 1.1, max = 2048 }, -- best block, the gain it brings, the largest that fits VMEM
}

local PROBS = { "outliers", "compile", "correct", "fix", "fix_new", "break_compile", "break_correct", "crash",
  "heldout", "botch", "insight", "hint", "direction", "prior_opt", "profile_truth", "profile_read", "tune_good" }
local POSITIVE = { "baseline_ms", "headroom", "naive", "size" }
local NONNEG = { "noise", "run_sd" }

local function bad(msg) return nil, { kind = "bad_task", message = msg } end

-- The parameters with their defaults filled in and checked; nil, message.
local function checked(spec, path)
  local p = {}
  for k, v in pairs(M.DEFAULTS) do p[k] = v end
  for k, v in pairs(spec) do
    if M.DEFAULTS[k] == nil and k ~= "target" and k ~= "name" and k ~= "description" and k ~= "family"
        and k ~= "mirrors" then
      return nil, path .. ": unknown parameter '" .. tostring(k) .. "' (docs/simulator.md lists them)"
    end
    p[k] = v
  end
  for _, k in ipairs(PROBS) do
    if type(p[k]) ~= "number" or p[k] < 0 or p[k] > 1 then return nil, path .. ": " .. k .. " must be in [0, 1]" end
  end
  for _, k in ipairs(POSITIVE) do
    if type(p[k]) ~= "number" or p[k] <= 0 then return nil, path .. ": " .. k .. " must be a number > 0" end
  end
  for _, k in ipairs(NONNEG) do
    if type(p[k]) ~= "number" or p[k] < 0 then return nil, path .. ": " .. k .. " must be a number >= 0" end
  end
  local t = p.tune
  if type(t) ~= "table" or type(t.best) ~= "number" or type(t.gain) ~= "number" or t.gain < 1 then
    return nil, path .. ": tune must be {best = block, gain = number >= 1, max = block}"
  end
  p.tune = { best = t.best, gain = t.gain, max = t.max or 2048 }
  if p.naive > p.headroom / p.tune.gain then
    return nil, path .. ": naive must be at most headroom / tune.gain (a kernel with no optimisation cannot beat "
      .. "the best one)"
  end
  local total, opts = 0, {}
  for name, w in pairs(p.opts) do
    if not kernel.OPT[name] then return nil, path .. ": opts: unknown optimisation '" .. tostring(name) .. "'" end
    if type(w) ~= "number" or w <= 0 then return nil, path .. ": opts." .. name .. " must be a weight > 0" end
    total = total + w
  end
  if total <= 0 then return nil, path .. ": opts must name at least one useful optimisation" end
  for name, w in pairs(p.opts) do opts[name] = w / total end
  p.opts = opts
  p.useful = {}
  for name in pairs(opts) do p.useful[#p.useful + 1] = name end
  table.sort(p.useful, function(a, b) return kernel.OPT[a].index < kernel.OPT[b].index end)
  return p
end

local cache = {}

--- The parameters of the sim task in `dir` (its task.lua, run without any
--- globals, defaults filled in), loaded once per directory; nil, err with
--- err = {kind = "bad_task", message} naming the file.
---@param dir string
function M.load(dir)
  if cache[dir] then return cache[dir] end
  local path = dir .. "/task.lua"
  local chunk, err = loadfile(path, "t", {})
  if not chunk then return bad(tostring(err)) end
  local ok, spec = pcall(chunk)
  if not ok or type(spec) ~= "table" then return bad(path .. ": " .. (ok and "must return a table" or tostring(spec))) end
  if spec.target ~= "sim" then return bad(path .. ": not a sim task (target = \"sim\" expected)") end
  local p, perr = checked(spec, path)
  if not p then return bad(perr) end
  p.name = spec.name or dir:match("([^/]+)/*$")
  p.description = spec.description or ""
  p.family = spec.family
  p.mirrors = spec.mirrors
  p.dir = dir
  cache[dir] = p
  return p
end

--- Forget loaded parameters (a test that rewrites a task.lua).
function M.reset() cache = {} end

--- The quality Q of a state (see the module comment), unclamped.
---@param p table task parameters
---@param st table kernel state
function M.quality(p, st)
  local q = 0
  for _, o in ipairs(st.opts) do
    if o.botched then
      q = q - p.botch_cost
    elseif p.opts[o.name] then
      q = q + p.opts[o.name]
    else
      q = q - p.useless_cost
    end
  end
  return q
end

--- What is left to gain: the weight of the useful optimisations the state
--- does not apply cleanly (0..1).
function M.remaining(p, st)
  local left = 0
  for name, w in pairs(p.opts) do
    local o = kernel.applied(st, name)
    if not o or o.botched then left = left + w end
  end
  return left
end

--- The speedup factor block size `block` brings (1 .. tune.gain).
function M.tune_factor(p, block)
  if not block then return 1 end
  local d = math.abs(math.log(block / p.tune.best, 2))
  return p.tune.gain ^ (1 - math.min(1, d / 2))
end

--- The true (noise-free) speedup over the baseline of a state with block
--- size `block` (default: the state's own).
function M.speedup(p, st, block)
  if st.reference then return 1.0 end
  local q = math.max(-1, math.min(1, M.quality(p, st)))
  local core_max = p.headroom / p.tune.gain
  return p.naive * (core_max / p.naive) ^ q * M.tune_factor(p, block or st.block)
end

--- The useful optimisations a state lacks (missing or botched), heaviest first.
function M.missing(p, st)
  local out = {}
  for _, name in ipairs(p.useful) do
    local o = kernel.applied(st, name)
    if not o or o.botched then out[#out + 1] = name end
  end
  table.sort(out, function(a, b)
    if p.opts[a] ~= p.opts[b] then return p.opts[a] > p.opts[b] end
    return kernel.OPT[a].index < kernel.OPT[b].index
  end)
  return out
end

--- A standard normal draw from generator r (Box-Muller).
function M.normal(r)
  local u1 = math.max(r:float(), 1e-12)
  return math.sqrt(-2 * math.log(u1)) * math.cos(2 * math.pi * r:float())
end

--- One measured latency (s) of a kernel whose true latency is `lat`: the
--- task's log-normal noise, and now and then a disturbed run (never when
--- `steady`).
function M.measure(p, lat, r, steady)
  local x = lat * math.exp(p.noise * M.normal(r))
  if not steady and r:float() < p.outliers then x = x * (1.1 + 0.2 * r:float()) end
  return x
end

--- The parameters as a run with seed `run_seed` sees them: insight, hint
--- and fix times the run's form, break_compile, break_correct and botch
--- divided by it, where form = exp(run_sd * z), z ~ N(0, 1) cut at +-2, is drawn from the
--- seed alone (every task of a repeat shares it); clamped to [0, 1].
---@param p table task parameters
---@param run_seed any
local seen = setmetatable({}, { __mode = "k" }) -- p -> {run_seed -> parameters}
function M.for_run(p, run_seed)
  if p.run_sd == 0 or run_seed == nil then return p end
  seen[p] = seen[p] or {}
  if seen[p][run_seed] then return seen[p][run_seed] end
  local z = math.max(-2, math.min(2, M.normal(rng.new("sim-run", run_seed)))) -- no absurd runs
  local form = math.exp(p.run_sd * z)
  local q = {}
  for k, v in pairs(p) do q[k] = v end
  for _, k in ipairs { "insight", "hint", "fix" } do q[k] = math.min(1, p[k] * form) end
  for _, k in ipairs { "break_compile", "break_correct", "botch" } do q[k] = math.min(1, p[k] / form) end
  q.form = form
  seen[p][run_seed] = q
  return q
end

--- The line every output of a simulated run or study carries, or nil:
--- `model` a model spec ("sim", "sim:gemini-2.5-pro", "openai:..."),
--- `targets` the targets of its tasks.
---@param model string|nil
---@param targets string[]|nil
---@return string|nil
function M.note(model, targets)
  local what = {}
  if type(model) == "string" and (model == "sim" or model:match("^sim:")) then what[#what + 1] = "model" end
  for _, t in ipairs(targets or {}) do
    if t == "sim" then
      what[#what + 1] = "device"
      break
    end
  end
  if #what == 0 then return nil end
  return "SIMULATION: simulated " .. table.concat(what, " and ") .. " (docs/simulator.md): these figures follow "
    .. "the tasks' parameters, not a real model or device"
end

return M
