--- plan: from the task, the reference, the parent kernel with its metrics
--- and profile feedback, an optional direction and knowledge-base passages,
--- write an optimisation plan. Returns {text, knowledge, transcript} or nil, err.
local common = require "agents.common"

local M = {}

---@param ctx table strategy context
---@param a table {parent = node|nil, feedback = string|nil, error = string|nil, direction = string|nil, key = string}
function M.run(ctx, a)
  local parent = a.parent
  local code = parent and parent.kind ~= "reference" and parent:file(ctx.task.candidate_file) or nil
  local query = table.concat({ ctx.task.name, ctx.task.description or "", a.direction or "", a.feedback or "",
    a.error or "" }, " ")
  local knowledge, used = common.knowledge(ctx, query)
  local system, user = common.render(ctx, "plan", "plan", {
    parent_code = code,
    parent_status = parent and parent.status or "",
    parent_metrics = common.metrics_line(parent),
    feedback = a.feedback or (parent and parent.meta and parent.meta.feedback),
    error = a.error,
    direction = a.direction,
    knowledge = knowledge,
  })
  local text, tr = common.ask(ctx, "plan", system, user, a.key .. "/plan")
  if not text then return nil, tr end
  return { text = text, knowledge = used, transcript = tr }
end

return M
