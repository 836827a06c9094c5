--- plan: from the task, the reference, the parent kernel with its plan,
--- metrics, best tuned configuration and profile feedback (the raw profile
--- when no feedback was written), the plans this trajectory already tried
--- and how each ended, an optional direction and knowledge-base passages,
--- write an optimisation plan. Returns {text, knowledge, transcript} or nil, err.
local common = require("agents.common")

local M = {}

local function first_line(s)
  return (tostring(s or ""):match("^%s*([^\n]*)") or ""):gsub("^[#%*%s]+", ""):sub(1, 200)
end

-- "block_m=128, block_n=256 (best of 6 configurations tried)" from an
-- autotune result ({params, tried = list of configurations, ...}).
local function tune_line(t)
  if type(t) ~= "table" or type(t.params) ~= "table" then return nil end
  local parts = {}
  for k, v in pairs(t.params) do parts[#parts + 1] = tostring(k) .. "=" .. tostring(v) end
  if #parts == 0 then return nil end
  table.sort(parts)
  local n = type(t.tried) == "table" and #t.tried or 0
  return table.concat(parts, ", ") .. (n > 0 and string.format(" (best of %d configurations tried)", n) or "")
end

--- The "plans already tried" text: one entry per plan, {plan, outcome}
--- (outcome: "1.83x the baseline" or "compile_error: first error line").
function M.tried_text(ctx, tried)
  if type(tried) ~= "table" or #tried == 0 then return nil end
  local shown = common.setting(ctx, "agent_plans_shown")
  local lines = {}
  for i = math.max(1, #tried - shown + 1), #tried do
    local t = tried[i]
    lines[#lines + 1] = string.format("%d. %s -> %s", i, first_line(t.plan), t.outcome or "?")
  end
  return table.concat(lines, "\n")
end

---@param ctx table strategy context
---@param a table {parent = node|nil, feedback = string|nil, error = string|nil, direction = string|nil,
---  tried = {{plan, outcome}}|nil, key = string}
function M.run(ctx, a)
  local parent = a.parent
  local candidate = parent and parent.kind ~= "reference"
  local code = candidate and parent:file(ctx.task.candidate_file) or nil
  local meta = parent and parent.meta or {}
  local feedback = a.feedback or meta.feedback
  local query = table.concat({ ctx.task.name, ctx.task.description or "", a.direction or "", feedback or "",
    a.error or "" }, " ")
  local knowledge, used = common.knowledge(ctx, query)
  local system, user = common.render(ctx, "plan", "plan", {
    parent_code = code,
    parent_status = parent and parent.status or "",
    parent_metrics = common.metrics_line(parent),
    parent_plan = candidate and parent.plan or nil,
    parent_tune = candidate and tune_line(meta.tune) or nil,
    feedback = feedback,
    raw_profile = not feedback and candidate and meta.profile
      and common.clip(ctx, meta.profile, "agent_plan_error_chars") or nil,
    tried = M.tried_text(ctx, a.tried),
    error = a.error and common.clip(ctx, a.error, "agent_plan_error_chars") or nil,
    direction = a.direction,
    knowledge = knowledge,
  })
  local text, tr = common.ask(ctx, "plan", system, user, a.key .. "/plan")
  if not text then return nil, tr end
  return { text = text, knowledge = used, transcript = tr }
end

return M
