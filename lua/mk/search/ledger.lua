--- mk.search.ledger: what a run spent in the sessions before this one, read
--- back from its event log (events.jsonl). A run that is killed and resumed
--- is one run: its budget and its summary count every session. The log
--- holds one `llm` event per model call (tokens, USD, latency), one
--- `evaluation` event per candidate evaluated (device seconds), and a
--- `run_start` or `resume` event where each session began.
local fs = require("mk.fs")
local cjson = require("cjson.safe")

local M = {}

local function zero()
  return { input_tokens = 0, output_tokens = 0, usd = 0, llm_s = 0, device_s = 0, wall_s = 0, calls = 0,
    cached_calls = 0, failures = {} }
end
M.zero = zero

--- Sum the spending recorded in the event log at `path` (a missing file is
--- a run that spent nothing). Torn or foreign lines are skipped.
---@param path string
---@return table {input_tokens, output_tokens, tokens, usd, llm_s, device_s, wall_s, calls, cached_calls
---  (answered from the LLM cache), failures ({kind = calls that failed with it}), sessions}
function M.read(path)
  local s = zero()
  local sessions, session_t0, last_t = 0, nil, nil
  local function close_session()
    if session_t0 and last_t and last_t > session_t0 then s.wall_s = s.wall_s + (last_t - session_t0) end
  end
  local text = fs.read(path) or ""
  for line in text:gmatch("[^\n]+") do
    -- only a few event types matter: skip the rest without decoding them
    local ty = line:match('"type":"([%w_]+)"')
    if ty == "llm" or ty == "llm_call" or ty == "evaluation" or ty == "run_start" or ty == "resume" then
      local e = cjson.decode(line)
      if type(e) == "table" then
        local t = tonumber(e.t)
        if ty == "run_start" or ty == "resume" then
          close_session()
          sessions, session_t0 = sessions + 1, t
        elseif ty == "evaluation" then
          s.device_s = s.device_s + (tonumber(e.device_s) or 0)
        else
          s.calls = s.calls + 1
          s.input_tokens = s.input_tokens + (tonumber(e.input_tokens) or 0)
          s.output_tokens = s.output_tokens + (tonumber(e.output_tokens) or 0)
          s.usd = s.usd + (tonumber(e.cost_usd) or tonumber(e.usd) or 0)
          s.llm_s = s.llm_s + (tonumber(e.latency_s) or 0)
          if e.cached == true then s.cached_calls = s.cached_calls + 1 end
          if type(e.error) == "string" then s.failures[e.error] = (s.failures[e.error] or 0) + 1 end
        end
        last_t = t or last_t
      end
    else
      last_t = tonumber(line:match('"t":([%d%.eE+%-]+)')) or last_t
    end
  end
  close_session()
  for _, k in ipairs { "input_tokens", "output_tokens", "calls", "cached_calls" } do s[k] = math.tointeger(s[k]) or s[k] end
  s.tokens = s.input_tokens + s.output_tokens
  s.sessions = sessions
  return s
end

return M
