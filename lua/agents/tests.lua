--- tests: before the loop, ask the model for extra input configurations
--- (edge shapes) that are frozen with the suite. Returns a list of size
--- tables that passed validation (every symbol, integers in [1, max_dim]).
local common = require("agents.common")
local cjson = require("cjson")

local M = {}

local function symbols_of(task)
  local names = {}
  for k in pairs(task.sizes or {}) do names[#names + 1] = k end
  table.sort(names)
  return names
end

local function encode_sizes(list)
  local parts = {}
  for _, s in ipairs(list or {}) do
    local kv = {}
    for _, k in ipairs(symbols_of({ sizes = s })) do kv[#kv + 1] = k .. "=" .. tostring(s[k]) end
    parts[#parts + 1] = "{" .. table.concat(kv, ", ") .. "}"
  end
  return table.concat(parts, " ")
end

--- Validate proposals: returns the accepted list and messages about the rest.
function M.validate(task, proposals, max_dim, max_extra)
  local syms = symbols_of(task)
  local ok, rejected = {}, {}
  for i, p in ipairs(type(proposals) == "table" and proposals or {}) do
    local good = type(p) == "table"
    local s = {}
    for _, k in ipairs(syms) do
      local v = good and math.tointeger(p[k])
      if not v or v < 1 or v > max_dim then good = false break end
      s[k] = v
    end
    if good and #ok < max_extra then ok[#ok + 1] = s else rejected[#rejected + 1] = i end
  end
  return ok, rejected
end

function M.run(ctx, a)
  local task = ctx.task
  if not task.sizes then return {} end
  local max_dim = a.max_dim or common.setting(ctx, "agent_tests_max_dim")
  local max_extra = a.max_extra or common.setting(ctx, "agent_tests_extra")
  local system, user = common.render(ctx, "tests", "tests", {
    symbols = table.concat(symbols_of(task), ", "),
    bench_sizes = encode_sizes({ task.sizes }),
    test_sizes = encode_sizes(task.test_sizes),
    max_extra = max_extra,
    max_dim = max_dim,
  })
  local text, tr = common.ask(ctx, "tests", system, user, a.key .. "/tests", { temperature = "agent_tool_temperature" })
  if not text then return {}, tr end
  local body = text:match("```json%s*\n(.-)```") or text:match("(%[.*%])")
  local okj, decoded = pcall(cjson.decode, body or "")
  local accepted = M.validate(task, okj and decoded or nil, max_dim, max_extra)
  return accepted, tr
end

return M
