--- implement: turn a plan into a complete candidate file (or, without a
--- plan, write a kernel from scratch: the zero-shot sampler; with a second
--- parent, combine two kernels: crossover). Returns {files, code, transcript,
--- knowledge} — code is nil when the reply had no fenced block.
local common = require("agents.common")

local M = {}

---@param ctx table
---@param a table {plan = string|nil, parent = node|nil, second = node|nil, key = string}
function M.run(ctx, a)
  local task = ctx.task
  local function code_of(n) return n and n.kind ~= "reference" and n:file(task.candidate_file) or nil end
  local job
  if a.second then
    job = "Write a new kernel that combines the strengths of the two kernels above" ..
      (a.plan and ", following the plan." or ".")
  elseif a.plan then
    job = "Implement the plan as a complete kernel."
  else
    job = "Write a complete, correct and fast kernel for this task."
  end
  local knowledge, used = common.knowledge(ctx, (a.plan or task.description or "") .. " " .. task.name)
  local system, user = common.render(ctx, "implement", "implement", {
    plan = a.plan,
    parent_code = code_of(a.parent),
    parent_metrics = common.metrics_line(a.parent),
    second_code = code_of(a.second),
    second_metrics = common.metrics_line(a.second),
    knowledge = knowledge,
    job = job,
  })
  local text, tr = common.ask(ctx, "implement", system, user, a.key .. "/implement")
  if not text then return nil, tr end
  local code = common.extract_code(text, common.vars(ctx, "implement").lang, task.entry)
  return { code = code, files = code and { [task.candidate_file] = code } or nil, transcript = tr, knowledge = used }
end

return M
