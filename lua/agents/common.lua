--- Shared pieces of the sub-agents: the variables every prompt gets, chat
--- through the run's model, code extraction and knowledge retrieval.
local template = require "mk.services.template"
local targets = require "mk.search.targets"
local home = require "mk.home"

local common = {}

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
    tune_syntax = p.tune_syntax,
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
  local retrieve = require "mk.services.retrieve"
  -- the target's own notes (a target from outside the engine's tree too)
  local extra = { table.unpack(ctx.opts.kb_dirs or {}) }
  extra[#extra + 1] = targets.kb_dir(ctx.task.target)
  local passages = retrieve.passages(query, { k = ctx.opts.kb_k or 3, max_chars = ctx.opts.kb_chars or 2500,
    extra_dirs = extra, target = ctx.task.target })
  if not passages or #passages == 0 then return nil, {} end
  return retrieve.format(passages), retrieve.refs(passages)
end

--- Extract the code of a reply: the last fenced block in the target's
--- language (or any fenced block). Returns nil when there is none.
function common.extract_code(text, lang)
  local best
  for info, body in text:gmatch("```([%w_+-]*)[^\n]*\n(.-)\n?```") do
    if info == lang or info == "" or (lang == "c" and (info == "C" or info == "cpp")) or
        (lang == "python" and info == "py") then
      best = body
    end
  end
  return best
end

--- Ask the run's model. key identifies the step (it seeds sampling and
--- keeps cache entries of different steps apart). Returns reply text and
--- a transcript entry, or nil, err.
function common.ask(ctx, agent, system, user, key, opts)
  opts = opts or {}
  local r, err = ctx:chat {
    agent = agent,
    key = key,
    system = system,
    messages = { { role = "user", content = user } },
    max_tokens = opts.max_tokens or ctx.opts.max_tokens or 8192,
    temperature = opts.temperature or ctx.opts.temperature or 0.7,
  }
  if not r then return nil, err end
  return r.text, { agent = agent, key = key, prompt = user, reply = r.text,
    tokens = { input = r.usage and r.usage.input_tokens, output = r.usage and r.usage.output_tokens } }
end

return common
