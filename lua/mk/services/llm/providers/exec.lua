--- mk.services.llm.providers.exec: a model that is any command. The request goes to the
--- command's stdin as JSON ({model, system, messages, max_tokens,
--- temperature, ...}); its stdout is the reply text, or a JSON object
--- {text =, thinking =, finish_reason =, usage = {input_tokens, ...}}.
--- Exit status 0 = success; 126/127 (cannot run) fail at once, other
--- statuses are retried as server errors.
local proc = require("mk.proc")
local json = require("mk.services.json")
local retry = require("mk.services.llm.retry")
local transport = require("mk.services.llm.transport")

local W = { name = "exec" }

local function estimate(s) return math.ceil(#s / 4) end

-- Run `command` (sh -c) with `input` on stdin, without blocking the loop.
-- Returns {code, stdout, stderr} | nil, err.
local function run(command, input, timeout)
  local r, err = proc.run { argv = { "/bin/sh", "-c", command }, stdin = input, timeout = timeout }
  if not r then
    return nil, { kind = "bad_request", retryable = false,
      message = "exec: cannot start the command: " .. tostring(err and err.message or err) }
  end
  if r.status == "timeout" then
    return nil, { kind = "timeout", retryable = true, message = string.format("exec: the command ran past %gs", timeout) }
  end
  local code = r.code
  if r.status == "signaled" then code = 128 + (r.signal or 0) end
  return { code = code or 1, stdout = r.stdout or "", stderr = r.stderr or "" }
end

function W.call(client, req, _)
  local system, msgs = transport.messages(req)
  local messages = {}
  for _, m in ipairs(msgs) do messages[#messages + 1] = { role = m.role, content = m.text } end
  local input = json.encode {
    model = client.model, system = system, messages = messages,
    max_tokens = req.max_tokens or client.max_tokens, temperature = req.temperature,
    thinking = req.thinking, stop = req.stop,
  }
  local r, err = run(client.command, input, client.timeout)
  if not r then return nil, err end
  if r.code ~= 0 then
    local cant = r.code == 126 or r.code == 127
    return nil, {
      kind = cant and "bad_request" or "server", retryable = not cant, status = r.code,
      message = string.format("exec: command exited with status %d: %s", r.code, retry.excerpt(r.stderr)),
    }
  end
  local out = r.stdout
  local obj = out:match("^%s*{") and json.decode(out)
  if type(obj) == "table" and type(obj.text) == "string" then
    local u = json.get(obj.usage, "table") or {}
    return {
      text = obj.text, thinking = json.get(obj.thinking, "string") or "",
      finish_reason = json.get(obj.finish_reason, "string") or "stop",
      usage = {
        input_tokens = json.int(u.input_tokens) or estimate(input),
        output_tokens = json.int(u.output_tokens) or estimate(obj.text),
        thinking_tokens = json.int(u.thinking_tokens) or 0,
      },
    }
  end
  if req.on_delta and out ~= "" then req.on_delta(out, "text", 1) end
  return {
    text = out, thinking = "", finish_reason = "stop",
    usage = { input_tokens = estimate(input), output_tokens = estimate(out), thinking_tokens = 0, estimated = true },
  }
end

return W
