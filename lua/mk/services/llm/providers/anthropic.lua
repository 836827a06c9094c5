--- mk.services.llm.providers.anthropic: the Anthropic Messages API wire format. base_url is
--- the host; x-api-key and anthropic-version headers.
local json = require("mk.services.json")
local transport = require("mk.services.llm.transport")

local W = {
  name = "anthropic",
  default_base_url = "https://api.anthropic.com",
  base_url_env = { "ANTHROPIC_BASE_URL" },
  api_key_env = "ANTHROPIC_API_KEY",
  version = "2023-06-01",
}

function W.build(client, req, key)
  local system, msgs = transport.messages(req)
  local messages = {}
  for _, m in ipairs(msgs) do messages[#messages + 1] = { role = m.role, content = m.text } end
  local body = {
    model = client.model, messages = messages, system = system,
    max_tokens = req.max_tokens or client.max_tokens or 8192,
    temperature = req.temperature, top_p = req.top_p, stop_sequences = req.stop,
  }
  local th = req.thinking
  if type(th) == "table" and th.budget_tokens then
    body.thinking = { type = "enabled", budget_tokens = th.budget_tokens }
  end
  if req.stream then body.stream = true end
  transport.merge(body, client.extra_body, req.extra)
  local headers = { ["content-type"] = "application/json", ["anthropic-version"] = client.anthropic_version or W.version }
  if key then headers["x-api-key"] = key end
  return { url = client.base_url .. "/v1/messages", headers = headers, body = body }
end

local function input_of(u)
  return (json.int(u.input_tokens) or 0) + (json.int(u.cache_creation_input_tokens) or 0)
    + (json.int(u.cache_read_input_tokens) or 0)
end

function W.parse(_, obj)
  local content = json.get(obj.content, "table")
  if not content then
    return nil, { kind = "bad_response", retryable = false, message = "anthropic: the answer has no content" }
  end
  local text, thinking = {}, {}
  for _, b in ipairs(content) do
    if type(b) == "table" then
      if b.type == "text" then text[#text + 1] = json.get(b.text, "string") or ""
      elseif b.type == "thinking" then thinking[#thinking + 1] = json.get(b.thinking, "string") or "" end
    end
  end
  local u = json.get(obj.usage, "table") or {}
  return {
    text = table.concat(text), thinking = table.concat(thinking),
    finish_reason = transport.finish_reason(json.get(obj.stop_reason, "string")),
    usage = { input_tokens = input_of(u), output_tokens = json.int(u.output_tokens) or 0, thinking_tokens = 0 },
    model = json.get(obj.model, "string"),
  }
end

function W.stream(_, _, emit)
  local st = { text = {}, thinking = {}, input = 0, output = 0, done = false }
  function st.event(_, name, data)
    local obj, err = transport.event_object("anthropic", data)
    if not obj then return err end
    local ty = json.get(obj.type, "string") or name
    if ty == "message_start" then
      local m = json.get(obj.message, "table") or {}
      local u = json.get(m.usage, "table") or {}
      st.input = input_of(u)
      st.output = json.int(u.output_tokens) or st.output
      st.model = json.get(m.model, "string")
    elseif ty == "content_block_delta" then
      local d = json.get(obj.delta, "table") or {}
      if d.type == "text_delta" and type(d.text) == "string" then
        st.text[#st.text + 1] = d.text
        emit(d.text, "text")
      elseif d.type == "thinking_delta" and type(d.thinking) == "string" then
        st.thinking[#st.thinking + 1] = d.thinking
        emit(d.thinking, "thinking")
      end
    elseif ty == "message_delta" then
      local u = json.get(obj.usage, "table") or {}
      st.output = json.int(u.output_tokens) or st.output -- cumulative
      local d = json.get(obj.delta, "table") or {}
      st.finish = json.get(d.stop_reason, "string") or st.finish
    elseif ty == "message_stop" then
      st.done = true
    elseif ty == "error" then
      local e = json.get(obj.error, "table") or {}
      local et = json.get(e.type, "string") or "error"
      local retryable = et == "overloaded_error" or et == "api_error" or et == "rate_limit_error"
      return { kind = et == "rate_limit_error" and "rate_limit" or (retryable and "server" or "bad_request"),
        retryable = retryable,
        message = "anthropic: " .. et .. " inside the stream: " .. tostring(json.get(e.message, "string") or "") }
    end
  end
  function st.result()
    return transport.stream_reply(st, { input_tokens = st.input, output_tokens = st.output, thinking_tokens = 0 }, st.done,
      "anthropic: the stream ended before message_stop")
  end
  return st
end

return transport.provider(W)
