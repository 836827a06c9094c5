-- hitl: human in the loop. Runs one sub-agent at a time and stops for a
-- person to accept, edit or reject the plan and the code before going on.
-- Decisions come from the terminal, or from a file (`--set decisions=FILE`)
-- with one decision per line: `accept`, `reject`, `edit PATH` (use the
-- contents of PATH instead) or `quit`; blank lines and `#` comments are
-- skipped. With a file, the run is reproducible and testable.
local fs = require "mk.fs"

local function decider(opts)
  if opts.decisions and opts.decisions ~= "" then
    local text, err = fs.read(opts.decisions)
    if not text then error("hitl: cannot read decisions file: " .. err.message, 0) end
    local lines = {}
    for line in text:gmatch("[^\n]+") do
      line = line:gsub("#.*", ""):match("^%s*(.-)%s*$")
      if line ~= "" then lines[#lines + 1] = line end
    end
    local i = 0
    return function(what)
      i = i + 1
      local d = lines[i]
      if not d then error("hitl: the decisions file has no decision left for the " .. what, 0) end
      local verb, arg = d:match("^(%a+)%s*(.*)$")
      if verb == "edit" then
        local new, rerr = fs.read(arg)
        if not new then error("hitl: cannot read edit file " .. arg .. ": " .. rerr.message, 0) end
        return "edit", new
      elseif verb == "accept" or verb == "reject" or verb == "quit" then
        return verb
      end
      error("hitl: bad decision '" .. d .. "' (accept, reject, edit PATH or quit)", 0)
    end
  end
  return function(what, content)
    io.stderr:write("\n----- ", what, " -----\n", content, "\n----- [a]ccept, [e]dit, [r]eject, [q]uit? ")
    local answer = (io.stdin:read("l") or "q"):lower():sub(1, 1)
    if answer == "e" then
      local path = os.tmpname()
      fs.write(path, content)
      local editor = os.getenv("VISUAL") or os.getenv("EDITOR") or "vi"
      os.execute(editor .. " " .. path)
      local new = fs.read(path) or content
      fs.remove(path)
      return "edit", new
    end
    return ({ a = "accept", r = "reject" })[answer] or "quit"
  end
end

return {
  defaults = { iters = 3, decisions = "", max_fix = 6 },
  run = function(ctx, opts)
    local decide = decider(opts)
    local current = ctx.graph:root()
    for it = 1, opts.iters do
      local K = ctx:path(current) .. "/hitl/i" .. it
      local plan = ctx.agents.plan { parent = current, key = K }
      if not plan then break end
      local verb, edited = decide("plan (iteration " .. it .. ")", plan.text)
      if verb == "quit" then break end
      if verb ~= "reject" then
        local text = verb == "edit" and edited or plan.text
        local impl = ctx.agents.implement { plan = text, parent = current, key = K }
        if impl then
          local cverb, code = decide("code (iteration " .. it .. ")", impl.code or "(no code in the reply)")
          if cverb == "quit" then break end
          if cverb ~= "reject" then
            if cverb == "edit" then impl = { code = code, files = { [ctx.task.candidate_file] = code }, transcript = impl.transcript } end
            local n = ctx:step(K .. (cverb == "edit" and "/edited" or "/impl"), function()
              return ctx:evaluated(cverb == "edit" and "edit" or "implement", { current }, impl,
                { plan = text, feedback = true, key = K })
            end)
            if n then
              n = ctx:repair(n, K, { max_fix = opts.max_fix, feedback = true })
              ctx:log("hitl iteration %d: %s %s", it, n.id, n.status)
              io.stderr:write(string.format("result: %s %s%s\n", n.id, n.status,
                n.metrics.speedup and string.format(" speedup %.2fx", n.metrics.speedup) or ""))
              if n.status == "ok" then current = n end
            end
          end
        end
      end
    end
    return ctx:best()
  end,
}
