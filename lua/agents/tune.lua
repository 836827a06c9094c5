--- tune: ask the model to declare the kernel's tunables and ranges (for
--- the engine's autotuner). Returns {files, code, transcript}; when the
--- reply has no code, the original files are kept.
local common = require("agents.common")

local M = {}

function M.run(ctx, a)
  local task = ctx.task
  local code = a.node:file(task.candidate_file)
  local system, user = common.render(ctx, "tune", "tune", {
    code = code, metrics = common.metrics_line(a.node),
  })
  local text, tr = common.ask(ctx, "tune", system, user, a.key .. "/tune", { temperature = "agent_tool_temperature" })
  if not text then return nil, tr end
  local new = common.extract_code(text, common.vars(ctx, "tune").lang, task.entry) or code
  return { code = new, files = { [task.candidate_file] = new }, transcript = tr }
end

return M
