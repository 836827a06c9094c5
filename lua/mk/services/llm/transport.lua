--- mk.services.llm.transport: one HTTP attempt of an LLM call, shared by the wire
--- formats (openai, gemini, anthropic). A wire module provides
---   build(client, req, key) -> {url =, headers =, body = table}
---   parse(client, obj)      -> resp | nil, err     (a decoded JSON answer)
---   stream(client, req, emit) -> state with
---       state:event(name, data) -> nil | err   (one SSE event)
---       state:result()          -> resp | nil, err
--- and this module does the rest: the request, SSE framing, error
--- classification and the checks that keep a bad body from crashing us.
local http = require("mk.http")
local json = require("mk.services.json")
local retry = require("mk.services.llm.retry")
local sse = require("mk.services.llm.sse")

local M = {}

local function transport_error(provider, err)
  local kind = err.kind
  local retryable = true
  if kind == "tls" then
    kind, retryable = "network", false
  elseif kind == "bad_request" or kind == "bad_response" then -- bad_response: over max_response_bytes
    retryable = false
  elseif kind ~= "timeout" then
    kind = "network"
  end
  return { kind = kind, retryable = retryable, message = provider .. ": " .. tostring(err.message) }
end

--- An answer that is 2xx but carries {"error": {...}} (some proxies do that).
local function embedded_error(client, r, obj)
  local e = json.get(obj.error, "table")
  if not e then return nil end
  local code = json.int(e.code)
  local status = (code and code >= 400 and code <= 599) and code or 500
  return retry.classify(client.provider, status, r.headers, r.body, client.api_key_env)
end

local function parse_body(wire, client, r)
  local obj = json.decode(r.body)
  if type(obj) ~= "table" then
    return nil, {
      kind = "bad_response", retryable = false, status = r.status,
      message = string.format("%s: HTTP %d with a body that is not JSON (is base_url %s right?): %s",
        client.provider, r.status, client.base_url or "", retry.excerpt(r.body)),
    }
  end
  local e = embedded_error(client, r, obj)
  if e then return nil, e end
  return wire.parse(client, obj)
end

--- One attempt. ctx = {key =, attempt =}. Returns resp | nil, err.
--- The JSON object of a stream event's data: obj, or nil and the error that
--- ends the stream (the data is not a JSON object; with `embedded`, an
--- `error` object the provider sent inside the stream).
---@param name string the provider, for messages
---@param data string
---@param embedded boolean|nil
function M.event_object(name, data, embedded)
  local obj = json.decode(data)
  if type(obj) ~= "table" then
    return nil, { kind = "bad_response", retryable = false, message = name .. ": a stream event is not JSON: " .. data:sub(1, 200) }
  end
  local e = embedded and json.get(obj.error, "table")
  if e then return nil, retry.embedded(name, e, "inside the stream") end
  return obj
end

--- A wire format served over HTTP, its `call` set: what an HTTP provider
--- module returns.
function M.provider(wire)
  function wire.call(client, req, ctx) return M.call(wire, client, req, ctx) end
  return wire
end

function M.call(wire, client, req, ctx)
  local spec = wire.build(client, req, ctx.key)
  for k, v in pairs(client.headers or {}) do spec.headers[k:lower()] = v end
  local stream = req.stream and true or false
  local on_delta = req.on_delta
  local st, parser, stream_err
  if stream then
    st = wire.stream(client, req, function(text, kind)
      if on_delta and text and text ~= "" then on_delta(text, kind, ctx.attempt) end
    end)
    parser = sse.new(function(name, data)
      if not stream_err then stream_err = st:event(name, data) end
    end)
  end
  local h <close> = http.open {
    method = "POST", url = spec.url, headers = spec.headers, body = json.encode(spec.body),
    timeout = client.timeout, connect_timeout = client.connect_timeout,
    stall_timeout = stream and client.stall_timeout or nil, lines = stream,
    max_response_bytes = client.max_response_bytes,
  }
  if stream then
    local feed
    while true do
      local lines = h:next_lines()
      if not lines then break end
      if feed == nil then feed = h:status() // 100 == 2 end
      if feed then
        for i = 1, #lines do
          parser:line(lines[i])
          if stream_err then return nil, stream_err end
          -- the stream's own end marker ([DONE], message_stop) ends the call
          -- whatever the connection does next (closing `h` aborts it)
          if st.done then return st:result() end
        end
      end
    end
  end
  local r, err = h:wait()
  if not r then return nil, transport_error(client.provider, err) end
  if r.status // 100 ~= 2 then
    return nil, retry.classify(client.provider, r.status, r.headers, r.body, client.api_key_env)
  end
  if not stream then return parse_body(wire, client, r) end
  parser:finish()
  if stream_err then return nil, stream_err end
  if parser.events == 0 then
    -- not an event stream: a server that ignored `stream`, or an error page
    return parse_body(wire, client, r)
  end
  return st:result()
end

--- The normalised finish reasons: stop, length, content_filter, tool_calls;
--- anything else is passed through lower-cased.
local FINISH = {
  stop = "stop", end_turn = "stop", stop_sequence = "stop", STOP = "stop",
  length = "length", max_tokens = "length", MAX_TOKENS = "length",
  content_filter = "content_filter", SAFETY = "content_filter", RECITATION = "content_filter",
  refusal = "content_filter", PROHIBITED_CONTENT = "content_filter", BLOCKLIST = "content_filter",
  tool_calls = "tool_calls", tool_use = "tool_calls",
}
--- The reply assembled by a streaming parser's state (text and thinking
--- pieces, finish, model) with the usage it collected; when the stream
--- ended before its end (`ended` false), a retryable network error whose
--- message is `early` instead.
function M.stream_reply(st, usage, ended, early)
  if not ended then return nil, { kind = "network", retryable = true, message = early } end
  return {
    text = table.concat(st.text), thinking = table.concat(st.thinking),
    finish_reason = M.finish_reason(st.finish),
    usage = usage or { input_tokens = 0, output_tokens = 0, thinking_tokens = 0 },
    model = st.model,
  }
end

function M.finish_reason(raw)
  if type(raw) ~= "string" then return nil end
  return FINISH[raw] or raw:lower()
end

--- The request's messages as {role, text} with system messages hoisted.
function M.messages(req)
  local system = { req.system }
  local out = {}
  for _, m in ipairs(req.messages or {}) do
    local text = m.content
    if type(text) == "table" then
      local parts = {}
      for _, p in ipairs(text) do parts[#parts + 1] = type(p) == "table" and (p.text or "") or tostring(p) end
      text = table.concat(parts)
    end
    if m.role == "system" then system[#system + 1] = text
    else out[#out + 1] = { role = m.role or "user", text = tostring(text or "") } end
  end
  local s = table.concat(system, "\n\n")
  return (s ~= "" and s or nil), out
end

--- Merge `extra` (provider-specific body fields) into body.
function M.merge(body, ...)
  for i = 1, select("#", ...) do
    local extra = select(i, ...)
    if type(extra) == "table" then
      for k, v in pairs(extra) do body[k] = v end
    end
  end
  return body
end

return M
