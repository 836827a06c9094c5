--- Shared pieces of the sub-agents: their tunable defaults, the variables
--- every prompt gets (task, target rules, hardware facts), chat through the
--- run's model, code extraction from replies and knowledge retrieval.
local template = require("mk.services.template")
local targets = require("mk.eval.targets")
local home = require("mk.home")
local cjson = require("cjson.safe")
local retrieve = require("mk.services.retrieve")

local common = {}

--- The agents' numbers, in one place. Each is a run option: override with
--- `mkengine run ... --set agent_max_tokens=16000` (ctx.opts wins).
common.DEFAULTS = {
  agent_max_tokens = 8192,          -- visible answer tokens per call
  agent_thinking_budget = -1,       -- thinking tokens per call where the API takes a budget (anthropic,
                                    -- gemini); added to agent_max_tokens, which they count it against.
                                    -- 0: off; -1: the provider's entry in THINKING below
  agent_thinking_effort = "",       -- reasoning effort where the API takes one (openai: low, medium, high)
  agent_length_retry = 2,           -- a reply cut by the token limit is asked again once with this many
                                    -- times the room (0: never)
  agent_temperature = 0.7,          -- plan and implement
  agent_fix_temperature = 0.4,      -- fix; after the same error twice it uses agent_temperature
  agent_tool_temperature = 0.2,     -- tune, profile, tests
  agent_error_chars = 8000,         -- error text kept with a failed node (its error.txt)
  agent_fix_error_chars = 6000,     -- error text in a fix prompt
  agent_plan_error_chars = 3000,    -- error text in a plan prompt
  agent_history_error_chars = 600,  -- error text of each earlier attempt or plan in a history
  agent_attempts_shown = 6,         -- earlier fix attempts of a candidate shown to fix
  agent_plans_shown = 8,            -- plans already tried shown to plan
  agent_tests_extra = 3,            -- extra test shapes the tests agent may add
  agent_tests_max_dim = 4099,       -- largest dimension of such a shape
  kb_k = 3,                         -- knowledge-base passages per prompt (kb=false: none)
  kb_chars = 2500,                  -- characters of passages per prompt
}

--- The thinking budget agent_thinking_budget = -1 stands for, per provider:
--- Gemini 2.5 models think by default and count it against the output
--- limit, so they get a bounded budget and the room for it; Anthropic
--- thinks only when asked; providers without a budget API are absent.
common.THINKING = { gemini = 8192, anthropic = 0 }
local BUDGET_API = { gemini = true, anthropic = true }

-- options older runs used for the same numbers
local LEGACY = { agent_max_tokens = "max_tokens", agent_temperature = "temperature" }

--- A setting of the agents: ctx.opts[name], else the default above.
---@param ctx table
---@param name string
function common.setting(ctx, name)
  local opts = ctx.opts or {}
  local v = opts[name]
  if v == nil and LEGACY[name] then v = opts[LEGACY[name]] end
  if v == nil then v = common.DEFAULTS[name] end
  if v == nil then error("agents: unknown setting " .. tostring(name), 2) end
  return v
end

--- Cut an error text for a prompt, keeping head and tail (setting = the
--- name of the length setting).
function common.clip(ctx, s, setting)
  return template.clip(s, common.setting(ctx, setting))
end

local function fmt_ms(s) return s and string.format("%.3f", s * 1000) or "?" end

--- One line of metrics for prompts: "ok, 1.234 ms, 2.10x faster than the baseline".
function common.metrics_line(node)
  if not node then return "" end
  local m = node.metrics or {}
  local parts = { node.status or "?" }
  if m.latency_s then parts[#parts + 1] = fmt_ms(m.latency_s) .. " ms" end
  if m.speedup then parts[#parts + 1] = string.format("%.2fx the baseline's speed", m.speedup) end
  return table.concat(parts, ", ")
end

--- The hardware and task facts the target reports (measured by the engine
--- where it can), as prompt lines. Not cached: the test sizes grow once
--- the tests agent's shapes are frozen, the device is known after the baseline.
function common.facts(ctx)
  local base = ctx.eval and ctx.eval.base
  local list = targets.facts(ctx.task, { device = base and (base.device or base.device_info) }) or {}
  local lines = {}
  for _, f in ipairs(list) do lines[#lines + 1] = "- " .. f[1] .. ": " .. tostring(f[2]) end
  return table.concat(lines, "\n")
end

--- The variables every prompt template can use.
function common.vars(ctx, agent)
  local task = ctx.task
  local p = targets.persona(task.target)
  local root = ctx.graph:root()
  return {
    agent = agent,
    task_name = task.name,
    description = task.description or "",
    signature = task.signature or "",
    reference = task.reference or "",
    lang = p.lang,
    target_desc = p.target_desc,
    rules = p.rules,
    task_notes = task.prompt_notes,
    tune_syntax = p.tune_syntax,
    tune_notes = p.tune_notes,
    plan_template = p.plan_template,
    skeleton = p.skeleton,
    facts = common.facts(ctx),
    atol = tostring((task.tolerance or {}).atol or "?"),
    rtol = tostring((task.tolerance or {}).rtol or "?"),
    baseline_ms = fmt_ms(root and root.metrics and root.metrics.latency_s),
  }
end

--- The prompt file lua/agents/prompts/<name>.txt.
---@param name string
---@return string
function common.prompt(name)
  return template.load(home.path("lua/agents/prompts/" .. name .. ".txt"))
end

--- Render the system prompt and a user prompt template for agent.
function common.render(ctx, agent, name, extra)
  local vars = common.vars(ctx, agent)
  for k, v in pairs(extra or {}) do vars[k] = v end
  return template.render(common.prompt("system"), vars), template.render(common.prompt(name), vars)
end

--- Passages from the knowledge base for a query, formatted for a prompt,
--- plus the list of what was used (recorded with the node).
function common.knowledge(ctx, query)
  if ctx.opts.kb == false then return nil, {} end
  -- the target's own notes (a target from outside the engine's tree too)
  local extra = { table.unpack(ctx.opts.kb_dirs or {}) }
  extra[#extra + 1] = targets.kb_dir(ctx.task.target)
  local passages = retrieve.passages(query, { k = common.setting(ctx, "kb_k"),
    max_chars = common.setting(ctx, "kb_chars"),
    extra_dirs = extra, target = ctx.task.target })
  if not passages or #passages == 0 then return nil, {} end
  return retrieve.format(passages), retrieve.refs(passages)
end

-- ---------------------------------------------------------------- replies

-- fence info words that name each candidate language ("" = unlabelled)
local LANG_WORDS = {
  c = { c = true, h = true, cpp = true, ["c++"] = true, cc = true, cxx = true, [""] = true },
  python = { python = true, python3 = true, py = true, py3 = true, [""] = true },
}

-- The fenced blocks of a reply, in order: {info, body, unclosed}. Fences
-- are ``` or ~~~ (three or more, indented or not); a block closes at a
-- fence of the same character at least as long; a block still open at the
-- end (a cut reply) runs to the end. Bodies are dedented.
local function blocks_of(text)
  local out, open = {}, nil
  local function finish(unclosed)
    local body, indent = open.lines, nil
    for _, l in ipairs(body) do
      if l:find("%S") then
        local w = #l:match("^[ \t]*")
        if not indent or w < indent then indent = w end
      end
    end
    for i, l in ipairs(body) do body[i] = l:sub((indent or 0) + 1) end
    out[#out + 1] = { info = open.info, body = table.concat(body, "\n"), unclosed = unclosed }
    open = nil
  end
  for line in (text .. "\n"):gmatch("([^\n]*)\n") do
    line = line:gsub("\r$", "")
    if open then
      local f = line:match("^[ \t]*([`~]+)[ \t]*$")
      if f and f:sub(1, 1) == open.char and not f:find(open.char == "`" and "~" or "`", 1, true)
          and #f >= open.len then
        finish(false)
      else
        open.lines[#open.lines + 1] = line
      end
    else
      local f, info = line:match("^[ \t]*(```+)[ \t]*([^`]*)$")
      if not f then f, info = line:match("^[ \t]*(~~~+)[ \t]*(.*)$") end
      if f then
        local word = (info:match("^{?%.?([^%s{}]*)") or ""):lower()
        open = { char = f:sub(1, 1), len = #f, info = word, lines = {} }
      end
    end
  end
  if open then finish(true) end
  return out
end

-- Whether source `s` defines `entry` (a C function definition, or a Python
-- def or module-level assignment).
local function defines(s, lang, entry)
  if not entry then return false end
  local e = entry:gsub("%p", "%%%0")
  if lang == "python" then
    s = "\n" .. s
    return s:find("\ndef%s+" .. e .. "%s*%(") ~= nil or s:find("\n" .. e .. "%s*=") ~= nil
  end
  return s:find("[%w_%*]%s+%**" .. e .. "%s*%b()%s*{") ~= nil
end

local function with_newline(s) return (s:gsub("%s+$", "")) .. "\n" end

--- Extract the code of a reply: among fenced blocks in the target's
--- language (or unlabelled), the one that defines the task's entry, else
--- the longest. Accepts ```/~~~ fences of any length, info words such as
--- python3, Python, py, c++, C, an unclosed last fence, indented fences
--- (dedented), a JSON object {"code": ...}, and a bare file that defines
--- the entry. Returns the code (ending with one newline) or nil.
---@param text string
---@param lang string target language ("c", "python", ...)
---@param entry string|nil the task's entry function name
---@return string|nil
function common.extract_code(text, lang, entry)
  if type(text) ~= "string" then return nil end
  if text:match("^%s*{") then
    local obj = cjson.decode(text)
    if type(obj) == "table" then
      local code = obj.code or obj.kernel or obj.file or obj.source or obj.content
      if type(code) == "string" then return common.extract_code(code, lang, entry) or with_newline(code) end
    end
  end
  local words = LANG_WORDS[lang] or { [lang or ""] = true, [""] = true }
  local defining, longest
  for _, b in ipairs(blocks_of(text)) do
    if words[b.info] and b.body:find("%S") then
      if defines(b.body, lang, entry) and (not defining or #b.body > #defining) then defining = b.body end
      if not longest or #b.body > #longest then longest = b.body end
    end
  end
  local code = defining or longest
  if not code and defines(text, lang, entry) and not text:find("```", 1, true) then code = text end
  return code and with_newline(code) or nil
end

--- The one-line "what I changed" a fix reply starts with ("Changed: ..."),
--- or a JSON reply's "changed" field; nil when there is none.
function common.changed_line(text)
  if type(text) ~= "string" then return nil end
  local obj = text:match("^%s*{") and cjson.decode(text)
  if type(obj) == "table" and type(obj.changed) == "string" then return obj.changed end
  for line in (text .. "\n"):gmatch("([^\n]*)\n") do
    if line:match("^```") or line:match("^~~~") then break end
    local c = line:match("^[%s%*#_]*[Cc]hanged[%*_]*:[%*_]*%s*(.-)%s*$")
    if c and c ~= "" then return c end
  end
  return nil
end

-- ---------------------------------------------------------------- the model

--- Ask the run's model. key identifies the step (it seeds sampling and
--- keeps cache entries of different steps apart). A reply cut by the token
--- limit (finish_reason "length") is asked again once with more room.
--- opts: {max_tokens, temperature (a number or the name of a setting)}.
--- Returns reply text and a transcript entry, or nil, err.
function common.ask(ctx, agent, system, user, key, opts)
  opts = opts or {}
  local max_tokens = opts.max_tokens or common.setting(ctx, "agent_max_tokens")
  local temperature = opts.temperature or "agent_temperature"
  if type(temperature) == "string" then temperature = common.setting(ctx, temperature) end
  local thinking
  local budget, effort = common.setting(ctx, "agent_thinking_budget"), common.setting(ctx, "agent_thinking_effort")
  local provider = ctx.llm and ctx.llm.provider
  if budget < 0 then budget = common.THINKING[provider] or 0 end
  if budget > 0 and (BUDGET_API[provider] or provider == "exec" or provider == nil) then
    thinking = { budget_tokens = budget }
    max_tokens = max_tokens + budget
  end
  if effort ~= "" then
    thinking = thinking or {}
    thinking.effort = effort
  end
  local req = { agent = agent, key = key, system = system, messages = { { role = "user", content = user } },
    max_tokens = max_tokens, temperature = temperature, thinking = thinking }
  local r, err = ctx:chat(req)
  if not r then return nil, err end
  local retried = false
  local factor = common.setting(ctx, "agent_length_retry")
  if r.finish_reason == "length" and factor > 0 then
    req.key, req.max_tokens = key .. "/longer", math.floor(max_tokens * factor)
    local r2 = ctx:chat(req)
    if r2 then r, retried = r2, true end
  end
  return r.text, { agent = agent, key = key, prompt = user, reply = r.text, finish_reason = r.finish_reason,
    retried_longer = retried or nil,
    tokens = { input = r.usage and r.usage.input_tokens, output = r.usage and r.usage.output_tokens } }
end

return common
