--- fix: repair a candidate that did not compile, was rejected or crashed.
--- The model sees what the implementer saw (task, reference, plan, the
--- target's rules and hardware facts), the failing code with its error and
--- the history of this candidate's earlier attempts, each with the one line
--- "what I changed" that attempt's reply gave. After the same error twice it
--- is told to change approach (and samples at the implement temperature).
--- Returns {files, code, changed, transcript}; code nil if no code came back.
local common = require("agents.common")

local M = {}

-- The first line that names an error, digits removed (line and column
-- numbers differ between two attempts that fail the same way).
local function signature(err)
  err = tostring(err or "")
  local line = err:match("[^\n]*[Ee]rror[^\n]*") or err:match("[^\n]*%S[^\n]*") or ""
  return (line:gsub("%d+", "#"):gsub("^%s+", ""):gsub("%s+$", ""))
end

--- The attempts at one candidate, oldest first, ending with `node`: its
--- ancestors while they are fix nodes, plus the implement (or tune) node
--- the first fix started from.
---@return table list of nodes
function M.history(ctx, node)
  local list, n = {}, node
  while n do
    table.insert(list, 1, n)
    if n.kind ~= "fix" then break end
    n = n.parents and n.parents[1] and ctx.graph:get(n.parents[1]) or nil
  end
  return list
end

--- Whether the last two attempts failed with the same error.
function M.repeated(history)
  local a, b = history[#history], history[#history - 1]
  return a ~= nil and b ~= nil and a.status == b.status and signature(a.error) == signature(b.error)
end

local function attempts_text(ctx, history, shown)
  local lines = {}
  local first = math.max(1, #history - shown)
  for i = first, #history do
    local n = history[i]
    local what = i == 1 and "the first version (" .. n.kind .. ")"
      or ((n.meta and n.meta.changed) or "(no summary given)")
    local err = i == #history and "(the kernel and the error above)"
      or common.clip(ctx, n.error or "", "agent_history_error_chars")
    lines[#lines + 1] = string.format("%d. %s -> %s:\n%s", i, what, n.status, err)
  end
  if #lines < 2 then return nil end -- only the kernel above: nothing to add
  return table.concat(lines, "\n")
end

---@param ctx table
---@param a table {node = failed node, attempt = integer, max_attempts = integer, key = string}
function M.run(ctx, a)
  local task = ctx.task
  local node = a.node
  local err = common.clip(ctx, node.error or "", "agent_fix_error_chars")
  local history = M.history(ctx, node)
  local repeated = M.repeated(history)
  local knowledge = common.knowledge(ctx, err:sub(1, 400))
  local system, user = common.render(ctx, "fix", "fix", {
    status = node.status,
    code = node:file(task.candidate_file) or "",
    error = err,
    plan = node.plan,
    attempts = attempts_text(ctx, history, common.setting(ctx, "agent_attempts_shown")),
    change_approach = repeated and ("The last two attempts failed with the same error (" .. node.status ..
      "). Repeating that kind of fix will not work: change approach (a simpler construct, another API, " ..
      "another loop or block structure), even at some cost in speed.") or nil,
    attempt = a.attempt,
    max_attempts = a.max_attempts,
    knowledge = knowledge,
  })
  local text, tr = common.ask(ctx, "fix", system, user, a.key .. "/fix",
    { temperature = repeated and "agent_temperature" or "agent_fix_temperature" })
  if not text then return nil, tr end
  local code = common.extract_code(text, common.vars(ctx, "fix").lang, task.entry)
  return { code = code, files = code and { [task.candidate_file] = code } or nil, transcript = tr,
    changed = common.changed_line(text) }
end

return M
