--- mk.services.llm.providers.sim: the simulated model (`--model sim`, or
--- `sim:MODEL` to be priced as MODEL). It answers tasks of the simulated
--- target (targets/sim) by reading the prompt the agents built, as a model
--- would: which job it is asked (plan, implement, fix, tune, profile,
--- tests), the kernel it is shown (a state file, mk.services.sim.kernel),
--- the error, the profile, the direction and the plans already tried. What
--- its reply holds follows mk.services.sim.model's rules, drawn from a
--- generator seeded by the run seed and the step key; the reply is in the
--- format each agent parses (a plan with a title line, a ```sim block, a
--- `Changed:` line, a JSON list). Tokens: the prompt's length (each kernel
--- counted at the size of the real kernel it stands for) and a reply
--- length drawn per job; its latency is simulated and recorded as the
--- call's, not slept (unless the client has `sim_sleep = FACTOR`).
--- Labelled a simulation in every output.
local kernel = require("mk.services.sim.kernel")
local model = require("mk.services.sim.model")
local simtask = require("mk.services.sim.task")
local rng = require("mk.services.rng")
local task = require("mk.services.task")

local M = {
  price_model = "gemini-2.5-pro", -- what `--model sim` is priced as
  offline = true, -- no network, nothing worth caching
}

--- The label every output shows.
function M.label(c)
  local priced = c.model ~= "sim" and c.model or M.price_model
  return "simulated model (mkengine sim: a simulation, not a real LLM; priced as " .. tostring(priced) .. ")"
end

local function err(kind, msg) return nil, { kind = kind, message = msg } end

-- The job a prompt asks for, from its text (the agent's name when the
-- text does not say).
local function job_of(prompt, agent)
  if prompt:find("\n## Kernel that failed", 1, true) then return "fix" end
  if prompt:find("\n## Kernel to autotune", 1, true) then return "tune" end
  if prompt:find("\n## Profile measured on the device", 1, true) then return "profile" end
  if prompt:find("Write an optimisation plan", 1, true) then return "plan" end
  if prompt:find("extra input size configurations", 1, true) then return "tests" end
  if prompt:find("Answer with one complete", 1, true) then return "implement" end
  return agent
end

-- The optimisation a text names: a [sim:opt=X] / [sim:hint=X] / (sim: X)
-- tag, else the first catalogue name in it.
local function opt_in(text)
  if not text then return nil end
  local tagged = text:match("%[sim:opt=([%w_]+)%]") or text:match("%[sim:hint=([%w_]+)%]")
    or text:match("%(sim: ([%w_]+)%)") or text:match("next: ([%w_]+)")
  if tagged and kernel.OPT[tagged] then return tagged end
  for _, o in ipairs(kernel.OPTS) do
    if text:find(o.name, 1, true) then return o.name end
  end
  return nil
end

-- The plans already tried, as {opt, ok}: lines "N. title [sim:opt=X] -> outcome".
local function tried_in(text)
  local out = {}
  for line in (text or ""):gmatch("[^\n]+") do
    local name, outcome = line:match("%[sim:opt=([%w_]+)%].-%->%s*(%S+)")
    if name then out[#out + 1] = { opt = name, ok = outcome:match("^ok") ~= nil } end
  end
  return out
end

local function code(st) return "```sim\n" .. kernel.format(st) .. "```" end

local ANSWER = {}

function ANSWER.plan(p, r, prompt)
  local parent = kernel.in_section(prompt, "Current kernel")
  local profile = kernel.section(prompt, "Profile feedback on the current kernel")
    or kernel.section(prompt, "Profile of the current kernel")
  local name, why = model.plan(p, r, { parent = parent, hint = opt_in(profile),
    direction = opt_in(kernel.section(prompt, "Direction to explore")),
    tried = tried_in(kernel.section(prompt, "Plans already tried")) })
  local o = kernel.OPT[name]
  local reason = ({ direction = "The direction given asks for it.", hint = "The profile names it as the bottleneck.",
    insight = "It removes work this kernel still does.", guess = "It may help here." })[why]
  return string.format("%s [sim:opt=%s]\n\n%s. %s Risk: the change can break compilation or numerics; "
    .. "keep the masking of partial blocks.", o.text, name, o.text, reason)
end

function ANSWER.implement(p, r, prompt)
  local st = model.implement(p, r, { opt = opt_in(kernel.section(prompt, "Plan to implement")),
    parent = kernel.in_section(prompt, "Kernel to start from"),
    second = kernel.in_section(prompt, "Second kernel to combine ideas from") })
  return code(st)
end

function ANSWER.fix(p, r, prompt)
  local st = kernel.in_section(prompt, "Kernel that failed")
  if not st then -- an unreadable file: written again from scratch
    return "Changed: rewrote the kernel as a well-formed state file\n\n" .. code(model.fresh(p, r))
  end
  local fixed, changed = model.fix(p, r, st, { error = kernel.section(prompt, "Error output"),
    change_approach = prompt:find("change approach", 1, true) ~= nil })
  return "Changed: " .. changed .. "\n\n" .. code(fixed)
end

function ANSWER.tune(p, r, prompt)
  local st = kernel.in_section(prompt, "Kernel to autotune")
  if not st then return "The kernel could not be read; nothing to tune." end
  return code(model.tune(p, r, st))
end

function ANSWER.profile(p, r, prompt)
  local hint = opt_in(kernel.section(prompt, "Profile measured on the device"))
  local said = model.read_profile(p, r, hint)
  return string.format("The kernel is limited by work the profile attributes to a missing optimisation. "
    .. "Most promising next: %s [sim:hint=%s].", kernel.OPT[said].text, said)
end

function ANSWER.tests() return "No extra shapes.\n\n```json\n[]\n```" end

-- Tokens of a prompt: its characters / 4, each sim kernel counted at the
-- size of the real kernel it stands for.
local function input_tokens(text)
  local n = #text // 4
  for _, block in ipairs(kernel.blocks(text)) do
    local st = kernel.parse(block)
    if st and st.size then n = n + math.max(0, st.size - #block // 4) end
  end
  return math.max(1, n)
end

-- Reply length in tokens: the kernel's size for a code reply, else a
-- drawn length per job (median plan 600, profile 150, other prose 80).
local PROSE = { plan = 600, profile = 150 }
local function output_tokens(job, text, r)
  local prose = math.floor((PROSE[job] or 80) * math.exp(0.3 * simtask.normal(r)) + 0.5)
  local n = prose
  for _, block in ipairs(kernel.blocks(text)) do
    local st = kernel.parse(block)
    n = n + (st and st.size or #block // 4)
  end
  return math.max(1, n)
end

--- Provider entry point (see mk.services.llm.register_provider).
function M.call(client, req)
  local meta = req.meta or {}
  if not meta.task_dir then return err("bad_request", "simulated model: request has no task (meta.task_dir)") end
  local p, perr = simtask.load(meta.task_dir)
  if not p then
    return err("bad_request", "the simulated model answers only tasks of the sim target (targets/sim): "
      .. tostring(meta.task_name) .. ": " .. tostring(perr and perr.message))
  end
  p = simtask.for_run(p, meta.run_seed) -- the run's form (run_sd), shared by the tasks of a repeat
  local prompt = ""
  for _, m in ipairs(req.messages or {}) do prompt = prompt .. (type(m.content) == "string" and m.content or "") .. "\n" end
  local job = job_of(prompt, meta.agent)
  local r = rng.new("sim", p.name, meta.seed or 0, req.sample or 0) -- the task too: tasks draw apart
  local answer = ANSWER[job]
  local text = answer and answer(p, r, prompt) or ("The simulated model has no rule for this request ("
    .. tostring(job) .. ").")
  local input = input_tokens((req.system or "") .. "\n" .. prompt)
  local output = output_tokens(job, text, r)
  -- time to first token, reading, then ~70 tokens/s; +-20 %
  local latency = (1.0 + input / 20000 + output / 70) * math.exp(0.2 * simtask.normal(r))
  if client.sim_sleep and client.sim_sleep > 0 then task.sleep(latency * client.sim_sleep) end
  return {
    text = text, finish_reason = "stop", model = client.model, latency_s = latency,
    usage = { input_tokens = input, output_tokens = output, thinking_tokens = 0 },
  }
end

require("mk.services.llm").register_provider("sim", M)

return M
