--- profile: turn the target's profile of a kernel into short feedback for
--- the next plan. Returns {text, transcript}; falls back to the raw
--- profile text when the model fails.
local common = require("agents.common")

local M = {}

function M.run(ctx, a)
  local raw = a.profile and (a.profile.text or "") or ""
  if raw == "" then return { text = "" } end
  local system, user = common.render(ctx, "profile", "profile", {
    code = a.code or "", profile = raw,
    metrics = type(a.metrics) == "table" and common.metrics_line(a.metrics) or a.metrics or "",
  })
  local text, tr = common.ask(ctx, "profile", system, user, a.key .. "/profile", { temperature = "agent_tool_temperature" })
  if not text then return { text = raw } end
  return { text = text, transcript = tr }
end

return M
