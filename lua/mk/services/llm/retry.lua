--- mk.services.llm.retry: the retry policy. Turns an HTTP error answer into an error
--- table {kind, status, message, retryable, retry_after} and computes the
--- wait before the next attempt. Kinds: auth, quota, rate_limit, server,
--- timeout, bad_request, bad_response, network (see docs/api/llm.md).
local json = require("mk.services.json")

local M = {}

--- Kinds retried when the error does not say otherwise.
M.retryable_kinds = { rate_limit = true, server = true, timeout = true, network = true }

local function excerpt(s, n)
  s = tostring(s or ""):gsub("%s+", " ")
  n = n or 200
  if #s > n then s = s:sub(1, n) .. "..." end
  return s
end
M.excerpt = excerpt

--- Seconds from a Gemini duration string ("37s", "0.5s", "1.2e-3s").
local function duration(s)
  if type(s) ~= "string" then return nil end
  local n = tonumber(s:match("^%s*([%d%.eE%+%-]+)s%s*$"))
  return n
end

--- The server's requested wait in seconds, if any: retry-after-ms, then
--- retry-after (seconds; an HTTP date is ignored), then Gemini's
--- google.rpc.RetryInfo.retryDelay in the error body.
---@param headers table|nil lower-case names
---@param err_obj table|nil the decoded `error` object of the body
function M.retry_after(headers, err_obj)
  headers = headers or {}
  local ms = tonumber(headers["retry-after-ms"])
  if ms and ms >= 0 then return ms / 1000 end
  local s = tonumber(headers["retry-after"])
  if s and s >= 0 then return s end
  local details = err_obj and json.get(err_obj.details, "table")
  for _, d in ipairs(details or {}) do
    if type(d) == "table" and tostring(json.get(d["@type"], "string") or ""):find("RetryInfo", 1, true) then
      local v = duration(json.get(d.retryDelay, "string"))
      if v then return v end
    end
  end
  return nil
end

local function per_day_quota(err_obj)
  for _, d in ipairs(json.get(err_obj and err_obj.details, "table") or {}) do
    if type(d) == "table" then
      for _, v in ipairs(json.get(d.violations, "table") or {}) do
        local id = type(v) == "table" and (json.get(v.quotaId, "string") or json.get(v.quotaMetric, "string")) or ""
        if id:find("PerDay", 1, true) or id:find("per_day", 1, true) then return true end
      end
    end
  end
  return false
end

local function api_key_invalid(err_obj, msg)
  for _, d in ipairs(json.get(err_obj and err_obj.details, "table") or {}) do
    if type(d) == "table" and d.reason == "API_KEY_INVALID" then return true end
  end
  return msg:find("API key not valid", 1, true) ~= nil
end

local QUOTA_CODES = {
  insufficient_quota = true, billing_hard_limit_reached = true, billing_not_active = true,
  billing_error = true, access_terminated = true,
}

local HINT = {
  auth = "check the API key in %s",
  quota = "the account is out of quota or credit (or hit a daily limit); retrying will not help",
  bad_request = "the request was rejected; retrying will not help",
}

--- Classify an HTTP answer with a status other than 2xx.
---@param provider string  for the message
---@param status integer
---@param headers table
---@param body string
---@param key_env string|nil  named in the hint for auth errors
---@return table err
function M.classify(provider, status, headers, body, key_env)
  local obj = json.decode(body)
  local e = type(obj) == "table" and json.get(obj.error, "table") or nil
  if not e and type(obj) == "table" and obj[1] and type(obj[1]) == "table" then -- Gemini sometimes wraps in a list
    e = json.get(obj[1].error, "table")
  end
  local msg = e and json.get(e.message, "string") or (body ~= "" and excerpt(body) or "no body")
  local etype = e and (json.get(e.type, "string") or json.get(e.status, "string")) or ""
  local code = e and json.get(e.code, "string") or ""
  local kind
  if status == 401 or status == 403 then
    kind = "auth"
  elseif status == 402 or QUOTA_CODES[code] or QUOTA_CODES[etype]
      or msg:find("credit balance", 1, true) or msg:find("exceeded your current quota", 1, true)
      or (status == 429 and per_day_quota(e)) then
    kind = "quota"
  elseif status == 400 and api_key_invalid(e, msg) then
    kind = "auth"
  elseif status == 408 then
    kind = "timeout"
  elseif status == 429 then
    kind = "rate_limit"
  elseif status == 409 or status >= 500 then
    kind = "server"
  else
    kind = "bad_request"
  end
  local retryable = M.retryable_kinds[kind] or false
  local xs = headers and headers["x-should-retry"]
  if xs == "true" and kind ~= "auth" and kind ~= "quota" then retryable = true end
  if xs == "false" then retryable = false end
  local label = etype ~= "" and (" " .. etype) or ""
  local message = string.format("%s: HTTP %d%s: %s", provider, status, label, msg)
  local hint = HINT[kind]
  if hint then message = message .. " (" .. hint:format(key_env or "the environment") .. ")" end
  return {
    kind = kind, status = status, message = message, retryable = retryable,
    retry_after = M.retry_after(headers, e), code = code ~= "" and code or nil,
  }
end

--- An error object found inside a 2xx answer or an event stream
--- ({"error": {message, type|status, code}}). A 4xx code or an
--- invalid-request type is not retried; anything else is a server error.
---@param provider string
---@param e table the decoded `error` object
---@param where string for the message ("inside the stream", ...)
function M.embedded(provider, e, where)
  local code = json.int(e.code)
  local etype = json.get(e.type, "string") or json.get(e.status, "string") or ""
  local kind, retryable = "server", true
  if code == 429 or etype == "rate_limit_error" or etype == "RESOURCE_EXHAUSTED" then
    kind = "rate_limit"
  elseif code == 401 or code == 403 or etype == "authentication_error" or etype == "permission_error" then
    kind, retryable = "auth", false
  elseif (code and code >= 400 and code < 500) or etype == "invalid_request_error" or etype == "INVALID_ARGUMENT" then
    kind, retryable = "bad_request", false
  end
  return { kind = kind, retryable = retryable, status = code,
    message = string.format("%s: error %s: %s%s", provider, where, etype ~= "" and (etype .. ": ") or "",
      tostring(json.get(e.message, "string") or "no message")) }
end

--- Exponential backoff with full jitter in [d/2, d], d = min(max, base * 2^(attempt-1)).
---@param attempt integer the attempt that just failed (1 = first)
function M.backoff(attempt, base, max)
  local d = math.min(max, base * 2 ^ (attempt - 1))
  return d * (0.5 + 0.5 * math.random())
end

return M
