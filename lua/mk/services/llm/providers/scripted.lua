--- mk.services.llm.providers.scripted: the offline scripted model, a TEST DOUBLE. It answers
--- each sub-agent from the task's bank (`<task>/scripted/bank.lua`: plans,
--- kernels, broken kernels and their fixes), choosing with a generator
--- seeded by the run seed and the step key, so outcomes vary with the seed:
--- some candidates fail to compile, some are wrong, some slow, some fast.
--- It goes through the same client path as real providers (retries,
--- concurrency, ledger) and is labelled "scripted model" everywhere.
local rng = require("mk.services.rng")
local fs = require("mk.fs")

local M = {
  label = "scripted model (offline test double, not a real LLM)",
  offline = true, -- no network, nothing worth caching
}

local banks = {}

local function load_bank(dir)
  if banks[dir] ~= nil then return banks[dir] end
  local path = dir .. "/scripted/bank.lua"
  local chunk, err = loadfile(path, "t", {})
  if not chunk then return nil, err end
  local ok, bank = pcall(chunk)
  if not ok or type(bank) ~= "table" or type(bank.plans) ~= "table" or type(bank.kernels) ~= "table" then
    return nil, "bad bank " .. path .. ": " .. tostring(ok and "needs plans and kernels tables" or bank)
  end
  bank.dir = dir .. "/scripted"
  bank.ids = {}
  for id in pairs(bank.kernels) do bank.ids[#bank.ids + 1] = id end
  table.sort(bank.ids)
  banks[dir] = bank
  return bank
end

-- The first `bank:ID` in the prompt that names a kernel of the bank (plans
-- have bank ids too).
local function kernel_id(bank, prompt)
  for id in prompt:gmatch("bank:([%w_%-]+)") do
    if bank.kernels[id] then return id end
  end
end

local function kernel_text(bank, id)
  local k = bank.kernels[id]
  if not k then return nil end
  local code = fs.read(bank.dir .. "/" .. k.file)
  if not code then return nil end
  local comment = k.file:match("%.py$") and "# " or "// "
  local lang = k.file:match("%.py$") and "python" or "c"
  return string.format("```%s\n%sbank:%s\n%s\n```", lang, comment, id, code)
end

local function err(kind, msg) return nil, { kind = kind, message = msg } end

local function tokens(s) return math.max(1, #s // 4) end

--- Provider entry point (see mk.services.llm.register_provider).
function M.call(_, req)
  local meta = req.meta or {}
  if not meta.task_dir then return err("bad_request", "scripted model: request has no task (meta.task_dir)") end
  local bank, berr = load_bank(meta.task_dir)
  if not bank then
    return err("bad_request", "scripted model: no usable bank for task " .. tostring(meta.task_name) ..
      " (" .. tostring(berr) .. ")")
  end
  local prompt = ""
  for _, m in ipairs(req.messages or {}) do prompt = prompt .. (m.content or "") .. "\n" end
  local r = rng.new(meta.seed or 0, req.sample or 0, meta.agent or "")
  local agent = meta.agent
  local text
  if agent == "plan" then
    local p = r:pick(bank.plans)
    text = string.format("%s [bank:%s]\n\n%s", p.title or ("Plan " .. p.id), p.id, p.text)
  elseif agent == "implement" then
    local plan_id = prompt:match("%[bank:([%w_%-]+)%]")
    local ids = bank.ids
    for _, p in ipairs(bank.plans) do
      if p.id == plan_id and p.kernels and #p.kernels > 0 then ids = p.kernels end
    end
    local id = r:pick(ids)
    text = "Here is the implementation.\n\n" .. (kernel_text(bank, id) or "")
  elseif agent == "fix" then
    -- the failing kernel's id: the prompt may name the plan's id before it
    local id = prompt:match("## Kernel that failed.-bank:([%w_%-]+)") or kernel_id(bank, prompt)
    local k = id and bank.kernels[id]
    local to = (k and k.fix) or id or r:pick(bank.ids)
    text = "Fixed version:\n\n" .. (kernel_text(bank, to) or "")
  elseif agent == "tune" then
    local id = prompt:match("## Kernel to autotune.-bank:([%w_%-]+)") or kernel_id(bank, prompt)
    text = (id and kernel_text(bank, id)) or "No tunables to add."
  elseif agent == "profile" then
    local first = prompt:match("## Profile measured on the device\n([^\n]+)") or "no profile"
    text = "Scripted feedback: " .. first ..
      " Try the next plan's idea on the most expensive loop and keep memory traffic minimal."
  elseif agent == "tests" then
    text = "```json\n" .. (bank.extra_sizes_json or "[]") .. "\n```"
  else
    text = "The scripted model has no answer for agent '" .. tostring(agent) .. "'."
  end
  local input = tokens((req.system or "") .. prompt)
  return {
    text = text,
    finish_reason = "stop",
    usage = { input_tokens = input, output_tokens = tokens(text), thinking_tokens = 0 },
    model = "scripted",
  }
end

require("mk.services.llm").register_provider("scripted", M)

return M
