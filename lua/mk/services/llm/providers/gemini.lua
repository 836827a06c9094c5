--- mk.services.llm.providers.gemini: the Gemini API (generativelanguage) wire format.
--- base_url is the host; the key goes in x-goog-api-key, never the URL.
local json = require("mk.services.json")
local transport = require("mk.services.llm.transport")

local W = {
  name = "gemini",
  default_base_url = "https://generativelanguage.googleapis.com",
  base_url_env = { "GEMINI_BASE_URL", "GOOGLE_GEMINI_BASE_URL" },
  api_key_env = { "GEMINI_API_KEY", "GOOGLE_API_KEY" },
}

function W.build(client, req, key)
  local system, msgs = transport.messages(req)
  local contents = {}
  for _, m in ipairs(msgs) do
    contents[#contents + 1] = { role = m.role == "assistant" and "model" or "user", parts = { { text = m.text } } }
  end
  local gc = {
    maxOutputTokens = req.max_tokens or client.max_tokens,
    temperature = req.temperature, topP = req.top_p, stopSequences = req.stop, seed = req.seed,
  }
  local th = req.thinking
  if type(th) == "table" then
    gc.thinkingConfig = { thinkingBudget = th.budget_tokens, includeThoughts = true }
  end
  local body = { contents = contents, generationConfig = next(gc) and gc or nil }
  if system then body.systemInstruction = { parts = { { text = system } } } end
  transport.merge(body, client.extra_body, req.extra)
  local headers = { ["content-type"] = "application/json" }
  if key then headers["x-goog-api-key"] = key end
  local path = "/v1beta/models/" .. client.model:gsub("^models/", "") ..
    (req.stream and ":streamGenerateContent?alt=sse" or ":generateContent")
  return { url = client.base_url .. path, headers = headers, body = body }
end

local function usage_of(u)
  u = json.get(u, "table")
  if not u then return nil end
  local thoughts = json.int(u.thoughtsTokenCount) or 0
  return {
    input_tokens = json.int(u.promptTokenCount) or 0,
    -- billed output = visible candidates + thoughts
    output_tokens = (json.int(u.candidatesTokenCount) or 0) + thoughts,
    thinking_tokens = thoughts,
  }
end

-- Append the parts of one (partial) response; returns finishReason.
local function take(obj, text, thinking, emit)
  local cands = json.get(obj.candidates, "table")
  local cand = cands and json.get(cands[1], "table")
  if not cand then return nil end
  local content = json.get(cand.content, "table") or {}
  for _, p in ipairs(json.get(content.parts, "table") or {}) do
    local s = type(p) == "table" and json.get(p.text, "string")
    if s and s ~= "" then
      if p.thought == true then
        thinking[#thinking + 1] = s
        if emit then emit(s, "thinking") end
      else
        text[#text + 1] = s
        if emit then emit(s, "text") end
      end
    end
  end
  return json.get(cand.finishReason, "string")
end

local function blocked(obj)
  local pf = json.get(obj.promptFeedback, "table")
  return pf and json.get(pf.blockReason, "string")
end

function W.parse(_, obj)
  local text, thinking = {}, {}
  local finish = take(obj, text, thinking)
  if not finish and not json.get(obj.candidates, "table") then
    local why = blocked(obj)
    if not why then
      return nil, { kind = "bad_response", retryable = false, message = "gemini: the answer has no candidates" }
    end
    finish = "SAFETY"
  end
  return {
    text = table.concat(text), thinking = table.concat(thinking),
    finish_reason = transport.finish_reason(finish),
    usage = usage_of(obj.usageMetadata) or { input_tokens = 0, output_tokens = 0, thinking_tokens = 0 },
    model = json.get(obj.modelVersion, "string"),
  }
end

function W.stream(_, _, emit)
  local st = { text = {}, thinking = {} }
  function st.event(_, _, data)
    local obj, err = transport.event_object("gemini", data, true)
    if not obj then return err end
    st.usage = usage_of(obj.usageMetadata) or st.usage -- cumulative: the last one counts
    st.model = json.get(obj.modelVersion, "string") or st.model
    st.finish = take(obj, st.text, st.thinking, emit) or st.finish
    if not st.finish and blocked(obj) then st.finish = "SAFETY" end
  end
  function st.result()
    return transport.stream_reply(st, st.usage, st.finish, "gemini: the stream ended before a finishReason")
  end
  return st
end

return transport.provider(W)
