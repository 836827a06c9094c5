--- fix: given a failed candidate and its compiler (or runtime) output,
--- repair it. Returns {files, code, transcript}; code nil if no code came back.
local common = require "agents.common"

local M = {}

---@param ctx table
---@param a table {node = failed node, attempt = integer, max_attempts = integer, key = string}
function M.run(ctx, a)
  local task = ctx.task
  local node = a.node
  local err = node.error or ""
  if #err > 6000 then err = err:sub(1, 6000) .. "\n[... truncated]" end
  local knowledge = common.knowledge(ctx, err:sub(1, 400))
  local system, user = common.render(ctx, "fix", "fix", {
    status = node.status,
    code = node:file(task.candidate_file) or "",
    error = err,
    attempt = a.attempt,
    max_attempts = a.max_attempts,
    knowledge = knowledge,
  })
  local text, tr = common.ask(ctx, "fix", system, user, a.key .. "/fix", { temperature = 0.2 })
  if not text then return nil, tr end
  local code = common.extract_code(text, common.vars(ctx, "fix").lang)
  return { code = code, files = code and { [task.candidate_file] = code } or nil, transcript = tr }
end

return M
