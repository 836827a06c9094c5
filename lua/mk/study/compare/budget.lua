--- mk.study.compare.budget: the per-run budget a comparison cuts every
--- run at: the resources it can cut on, parsed from `--budget`, the
--- default one (what the bench whose largest run spent least spent), and
--- in words.
local budget_lib = require("mk.search.budget")

local budget = {}

--- The resources a budget can cut on, in the order reports show them.
budget.RESOURCES = { "tokens", "usd", "llm_s", "device_s", "wall_s" }
local KNOWN = { tokens = true, usd = true, llm_s = true, device_s = true, wall_s = true }

local function fmt_amount(k, v)
  if k == "tokens" then
    if v >= 1e6 then return string.format("%.3g M tokens", v / 1e6) end
    if v >= 1e3 then return string.format("%.3g k tokens", v / 1e3) end
    return string.format("%d tokens", math.floor(v + 0.5))
  elseif k == "usd" then
    return string.format("$%.4g", v)
  end
  local label = ({ llm_s = "LLM", device_s = "device", wall_s = "wall" })[k] or k
  if v >= 3600 then return string.format("%.3g h %s", v / 3600, label) end
  if v >= 120 then return string.format("%.3g min %s", v / 60, label) end
  return string.format("%.3g s %s", v, label)
end
budget.fmt_amount = fmt_amount

--- The budget as words: "2 M tokens, 600 s device" (per run).
function budget.budget_text(limits)
  local bits = {}
  for _, k in ipairs(budget.RESOURCES) do
    if limits[k] then bits[#bits + 1] = fmt_amount(k, limits[k]) end
  end
  return #bits > 0 and (table.concat(bits, ", ") .. " per run") or "no budget cut"
end

--- Parse a budget: "tokens=2M,usd=5,llm_s=600,device_s=10m,wall_s=1h"
--- (numbers take k/M/G; seconds also s/m/h). Returns limits | nil, err.
function budget.parse_budget(text)
  local limits = {}
  for item in tostring(text):gmatch("[^,]+") do
    local k, v = item:match("^%s*([%w_]+)%s*=%s*(.-)%s*$")
    if not k then return nil, { kind = "bad_budget", message = "budget item '" .. item .. "' is not NAME=VALUE" } end
    if not KNOWN[k] then
      return nil, { kind = "bad_budget", message = "unknown budget '" .. k .. "' (known: tokens, usd, llm_s, device_s, wall_s)" }
    end
    -- mk.budget parses the run budgets; llm_s reads like device_s there
    local parsed, err = budget_lib.parse((k == "llm_s" and "device_s" or k) .. "=" .. v)
    if not parsed then return nil, { kind = "bad_budget", message = (err.message:gsub("device_s", k)) } end
    limits[k] = parsed[k == "llm_s" and "device_s" or k]
  end
  if next(limits) == nil then return nil, { kind = "bad_budget", message = "empty budget" } end
  return limits
end

--- The default budget: on tokens (wall seconds when a bench spent no
--- tokens), the largest per-run spend of the bench whose largest run spent
--- least, so no run of any strategy counts more than that.
function budget.default_budget(strategies)
  local resource = "tokens"
  for _, s in ipairs(strategies) do
    local any = false
    for _, t in ipairs(s.tasks) do
      for _, tr in ipairs(t.traces) do if (tr.total.tokens or 0) > 0 then any = true end end
    end
    if not any then resource = "wall_s" end
  end
  local b
  for _, s in ipairs(strategies) do
    local top = 0
    for _, t in ipairs(s.tasks) do
      for _, tr in ipairs(t.traces) do top = math.max(top, tr.total[resource] or 0) end
    end
    b = math.min(b or top, top)
  end
  return { [resource] = b }
end

return budget
