--- mkengine ask --model SPEC [options] PROMPT: one chat call, to check a
--- model spec, its key and endpoint before spending a run on them.
local cli = require("mk.cli")
local llm = require("mk.services.llm")

local M = {
  summary = "send one prompt to a model (checks --model, keys, endpoints)",
  usage = "usage: mkengine ask --model SPEC [--system TEXT] [--max-tokens N] [--temperature T] [--thinking N]\n"
    .. "                    [--stream] [--json] [--timeout S] [--llm-config FILE] [--llm-cache rw|ro|off]\n"
    .. "                    PROMPT|-",
  help = [[
SPEC   openai:MODEL, gemini:MODEL, anthropic:MODEL, exec:COMMAND or an alias
       from --llm-config. Keys come from OPENAI_API_KEY, GEMINI_API_KEY (or
       GOOGLE_API_KEY), ANTHROPIC_API_KEY; base URLs from OPENAI_BASE_URL,
       GEMINI_BASE_URL, ANTHROPIC_BASE_URL.
PROMPT the user message; "-" reads it from stdin.

--stream       print the answer as it arrives
--thinking N   thinking budget in tokens (Anthropic, Gemini)
--timeout S    give up after S seconds in all, retries included (default:
               the client's, about 5 minutes)
--json         print the whole reply (text, usage, cost, latency) as JSON

Exit code: 0 on an answer, 1 on an LLM error (its kind and message on
stderr), 2 on bad input.]],
}

function M.run(args)
  local o, pos = cli.parse(args, {
    flags = { stream = true, json = true },
    options = { model = "string", system = "string", max_tokens = "number", temperature = "number",
      thinking = "number", llm_config = "string", llm_cache = "string", timeout = "number" },
  }, M.usage)
  if o.timeout and o.timeout <= 0 then cli.usage_error("--timeout must be positive", M.usage) end
  if not o.model then cli.usage_error("--model is required", M.usage) end
  if #pos ~= 1 then cli.usage_error("expected one PROMPT", M.usage) end
  local prompt = pos[1] == "-" and io.read("a") or pos[1]
  if o.llm_cache and not ({ rw = true, ro = true, off = true })[o.llm_cache] then
    cli.usage_error("--llm-cache must be rw, ro or off", M.usage)
  end
  local copts = { config_file = o.llm_config, cache = o.llm_cache }
  if o.timeout then -- the whole call: every attempt and the wait between them
    copts.timeout, copts.give_up_after, copts.stall_timeout = o.timeout, o.timeout, math.min(60, o.timeout)
  end
  local ok, c = pcall(llm.from_spec, o.model, copts)
  if not ok then cli.input_error(tostring(type(c) == "table" and c.message or c)) end
  local streamed = false
  local r, err = c:chat {
    system = o.system, messages = { { role = "user", content = prompt } },
    max_tokens = o.max_tokens and math.tointeger(o.max_tokens), temperature = o.temperature,
    thinking = o.thinking and { budget_tokens = math.tointeger(o.thinking) } or nil,
    stream = o.stream or false,
    on_delta = (o.stream and not o.json) and function(d, kind)
      if kind == "text" then
        io.stdout:write(d)
        io.stdout:flush()
        streamed = true
      end
    end or nil,
  }
  if not r then
    io.stderr:write(string.format("mkengine ask: %s: %s\n", err.kind, err.message))
    return 1
  end
  if o.json then
    r.label = c.label
    io.stdout:write(cli.json(r), "\n")
    return 0
  end
  if not streamed then io.stdout:write(r.text) end
  io.stdout:write("\n")
  io.stdout:flush()
  local u = r.usage
  io.stderr:write(string.format("[%s: %d in, %d out (%d thinking) tokens, $%.6f, %.2f s, %d attempt%s%s]\n",
    c.label, u.input_tokens, u.output_tokens, u.thinking_tokens, r.cost_usd, r.latency_s, r.attempts,
    r.attempts == 1 and "" or "s", r.cached and ", cached" or ""))
  return 0
end

return M
