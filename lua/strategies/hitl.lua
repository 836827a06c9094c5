-- hitl: human in the loop. Runs one sub-agent at a time and stops for a
-- person to choose the node to expand, and to accept, edit or reject the
-- plan and the code before going on.
--
-- The questions go through ctx:ask (docs/strategies.md): the run page of
-- `mkengine run hitl ... --ui` or `mkengine serve` shows them with an
-- editor, and the terminal asks too when the engine has one (answers typed
-- there are read through the engine's loop, so nothing else stops while a
-- person thinks). Decisions are recorded in the run: `mkengine resume`
-- replays them.
--
-- Or from a file (`--set decisions=FILE`), one decision per line: `accept`,
-- `reject`, `edit PATH` (use the contents of PATH instead) or `quit`;
-- blank lines and `#` comments are skipped. With a file, the run is
-- reproducible and testable.
local fs = require "mk.fs"

local function file_decider(path)
  local text, err = fs.read(path)
  if not text then error("hitl: cannot read decisions file: " .. err.message, 0) end
  local lines = {}
  for line in text:gmatch("[^\n]+") do
    line = line:gsub("#.*", ""):match("^%s*(.-)%s*$")
    if line ~= "" then lines[#lines + 1] = line end
  end
  local i = 0
  return function(q)
    if q.kind == "choose" then return { verb = "choose", choice = q.options[1].id } end
    i = i + 1
    local d = lines[i]
    if not d then error("hitl: the decisions file has no decision left for the " .. q.title, 0) end
    local verb, arg = d:match("^(%a+)%s*(.*)$")
    if verb == "edit" then
      local new, rerr = fs.read(arg)
      if not new then error("hitl: cannot read edit file " .. arg .. ": " .. rerr.message, 0) end
      return { verb = "edit", text = new }
    elseif verb == "accept" or verb == "reject" or verb == "quit" then
      return { verb = verb }
    end
    error("hitl: bad decision '" .. d .. "' (accept, reject, edit PATH or quit)", 0)
  end
end

local function decider(ctx, opts)
  if opts.decisions and opts.decisions ~= "" then return file_decider(opts.decisions) end
  return function(q)
    q.terminal = true
    return ctx:ask(q)
  end
end

-- The correct nodes a person may choose to expand, fastest first (at most 8).
local function expandable(ctx)
  local list = ctx.graph:nodes(function(n) return n.status == "ok" end)
  table.sort(list, function(a, b) return (a.metrics.speedup or 0) > (b.metrics.speedup or 0) end)
  local options = {}
  for i = 1, math.min(#list, 8) do
    local n = list[i]
    options[i] = { id = n.id, label = string.format("%s %s%s", n.id, n.kind,
      n.metrics.speedup and string.format(" %.2fx", n.metrics.speedup) or "") }
  end
  return options
end

-- One iteration from `current`: plan, review, implement, review, evaluate.
-- Returns the node to continue from, or nil, "quit".
local function iteration(ctx, opts, decide, current, it)
  local K = ctx:path(current) .. "/hitl/i" .. it
  local plan = ctx.agents.plan { parent = current, key = K }
  if not plan then return nil, "quit" end
  local d = decide { key = K .. "/plan", kind = "review", title = "plan (iteration " .. it .. ")", text = plan.text }
  if d.verb == "quit" then return nil, "quit" end
  if d.verb == "reject" then return current end
  local text = d.verb == "edit" and d.text or plan.text
  local impl = ctx.agents.implement { plan = text, parent = current, key = K }
  if not impl then return current end
  local c = decide { key = K .. "/code", kind = "review", title = "code (iteration " .. it .. ")",
    text = impl.code or "(no code in the reply)" }
  if c.verb == "quit" then return nil, "quit" end
  if c.verb == "reject" then return current end
  if c.verb == "edit" then
    impl = { code = c.text, files = { [ctx.task.candidate_file] = c.text }, transcript = impl.transcript }
  end
  local n = ctx:step(K .. (c.verb == "edit" and "/edited" or "/impl"), function()
    return ctx:evaluated(c.verb == "edit" and "edit" or "implement", { current }, impl,
      { plan = text, feedback = true, key = K })
  end)
  if not n then return current end
  n = ctx:repair(n, K, { max_fix = opts.max_fix, feedback = true })
  ctx:log("hitl iteration %d: %s %s%s", it, n.id, n.status,
    n.metrics.speedup and string.format(" speedup %.2fx", n.metrics.speedup) or "")
  return n.status == "ok" and n or current
end

return {
  defaults = { iters = 3, decisions = "", max_fix = 6, choose = true },
  run = function(ctx, opts)
    local decide = decider(ctx, opts)
    local current = ctx.graph:root()
    for it = 1, opts.iters do
      if ctx:exhausted() then break end
      local options = opts.choose and expandable(ctx) or {}
      if #options > 1 then
        local d = decide { key = "hitl/choose" .. it, kind = "choose", title = "node to expand (iteration " .. it .. ")",
          text = "Which node should the next plan start from?", options = options }
        if d.verb == "quit" then break end
        current = ctx.graph:get(d.choice) or current
      end
      local nxt, why = iteration(ctx, opts, decide, current, it)
      if why == "quit" then break end
      current = nxt
    end
    return ctx:best()
  end,
}
