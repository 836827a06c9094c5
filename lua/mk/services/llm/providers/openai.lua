--- mk.services.llm.providers.openai: the OpenAI chat-completions wire format. Also what vLLM,
--- llama.cpp, Ollama, OpenRouter and most local servers speak: point
--- base_url (which includes /v1) at them.
local json = require("mk.services.json")
local transport = require("mk.services.llm.transport")

local W = {
  name = "openai",
  default_base_url = "https://api.openai.com/v1",
  base_url_env = { "OPENAI_BASE_URL" },
  api_key_env = "OPENAI_API_KEY",
}

function W.build(client, req, key)
  local system, msgs = transport.messages(req)
  local messages = {}
  if system then messages[1] = { role = "system", content = system } end
  for _, m in ipairs(msgs) do messages[#messages + 1] = { role = m.role, content = m.text } end
  local body = { model = client.model, messages = messages }
  local max_tokens = req.max_tokens or client.max_tokens
  if max_tokens then
    -- OpenAI's own models want max_completion_tokens; most compatible servers max_tokens
    local field = client.max_tokens_field
      or (client.base_url == W.default_base_url and "max_completion_tokens" or "max_tokens")
    body[field] = max_tokens
  end
  body.temperature = req.temperature
  body.top_p = req.top_p
  body.stop = req.stop
  body.seed = req.seed
  local th = req.thinking
  if type(th) == "table" and th.effort then body.reasoning_effort = th.effort end
  if req.stream then
    body.stream = true
    body.stream_options = { include_usage = true }
  end
  transport.merge(body, client.extra_body, req.extra)
  local headers = { ["content-type"] = "application/json", accept = req.stream and "text/event-stream" or "application/json" }
  if key then headers.authorization = "Bearer " .. key end
  return { url = client.base_url .. "/chat/completions", headers = headers, body = body }
end

local function usage_of(u)
  u = json.get(u, "table")
  if not u then return nil end
  local details = json.get(u.completion_tokens_details, "table") or {}
  return {
    input_tokens = json.int(u.prompt_tokens) or 0,
    output_tokens = json.int(u.completion_tokens) or 0,
    thinking_tokens = json.int(details.reasoning_tokens) or 0,
  }
end

local function thinking_of(m)
  return json.get(m.reasoning_content, "string") or json.get(m.reasoning, "string")
end

function W.parse(_, obj)
  local choice = json.get(obj.choices, "table") and json.get(obj.choices[1], "table")
  if not choice then
    return nil, { kind = "bad_response", retryable = false, message = "openai: the answer has no choices" }
  end
  local m = json.get(choice.message, "table") or {}
  return {
    text = json.get(m.content, "string") or "",
    thinking = thinking_of(m) or "",
    finish_reason = transport.finish_reason(json.get(choice.finish_reason, "string")),
    usage = usage_of(obj.usage) or { input_tokens = 0, output_tokens = 0, thinking_tokens = 0 },
    model = json.get(obj.model, "string"),
  }
end

function W.stream(_, _, emit)
  local st = { text = {}, thinking = {}, done = false }
  function st.event(_, _, data)
    if data == "[DONE]" then
      st.done = true
      return nil
    end
    local obj, err = transport.event_object("openai", data, true)
    if not obj then return err end
    st.model = json.get(obj.model, "string") or st.model
    st.usage = usage_of(obj.usage) or st.usage
    local choice = json.get(obj.choices, "table") and json.get(obj.choices[1], "table")
    if choice then
      local d = json.get(choice.delta, "table") or {}
      local th = thinking_of(d)
      if th and th ~= "" then
        st.thinking[#st.thinking + 1] = th
        emit(th, "thinking")
      end
      local c = json.get(d.content, "string")
      if c and c ~= "" then
        st.text[#st.text + 1] = c
        emit(c, "text")
      end
      st.finish = json.get(choice.finish_reason, "string") or st.finish
    end
  end
  function st.result()
    return transport.stream_reply(st, st.usage, st.done or st.finish,
      "openai: the stream ended before its end (no finish_reason, no [DONE])")
  end
  return st
end

return transport.provider(W)
