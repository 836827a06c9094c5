--- mk.services.llm: LLM clients for agents and strategies. One client per model;
--- `client:chat{...}` waits (inside a task) and returns the reply or
--- `nil, err` with `err.kind` one of auth, quota, rate_limit, server,
--- timeout, bad_request, bad_response, network, cache_miss.
---
--- Policy lives here: retries with backoff, per-client concurrency and
--- rate limits, the response cache (record/replay), cost and the ledger.
--- Wire formats are provider modules in lua/mk/services/llm/providers/
--- (openai, gemini, anthropic, exec, scripted, the offline test double, and
--- sim, the simulated model of docs/simulator.md);
--- other providers register with `llm.register_provider(name, {call = fn,
--- label = ...})`. Only those names can be given to `llm.client`.
local cache = require("mk.services.llm.cache")
local prices = require("mk.services.llm.prices")
local retry = require("mk.services.llm.retry")
local task = require("mk.services.task")
local util = require("mk.services.util")

local llm = {}

-- the shipped providers, loaded on first use (scripted registers itself)
local BUILTIN = { openai = true, gemini = true, anthropic = true, exec = true, scripted = true, sim = true }
local registry = {}

--- Register a provider implemented in Lua (no HTTP needed).
--- impl.call(client, req) -> resp | nil, err, where resp = {text, thinking,
--- finish_reason, usage = {input_tokens, output_tokens, thinking_tokens}}.
--- impl.label (string or function(client)) names the client in reports.
---@param name string
---@param impl table
function llm.register_provider(name, impl)
  if type(name) ~= "string" or not name:match("^[%w_%-]+$") then
    error("llm.register_provider: name must be a word, got " .. tostring(name), 2)
  end
  if type(impl) ~= "table" or type(impl.call) ~= "function" then
    error("llm.register_provider: impl must be a table with a call function", 2)
  end
  registry[name] = impl
end

local function provider_impl(name)
  if registry[name] then return registry[name] end
  if BUILTIN[name] then
    local m = require("mk.services.llm.providers." .. name)
    registry[name] = registry[name] or m
    return registry[name]
  end
  return nil
end

--- Provider names known now (registered or built in).
function llm.providers()
  local names = {}
  for n in pairs(BUILTIN) do names[#names + 1] = n end
  for n in pairs(registry) do
    if not BUILTIN[n] then names[#names + 1] = n end
  end
  table.sort(names)
  return names
end

local function input_error(msg)
  return util.error({ kind = "bad_request", message = msg, exit = 2 })
end

-- ---- ledger and totals ---------------------------------------------------

local ledger_fn
local totals

--- Zero the running totals.
function llm.reset_totals()
  totals = { calls = 0, errors = 0, cached_calls = 0, input_tokens = 0, output_tokens = 0,
    thinking_tokens = 0, cost_usd = 0, billed_usd = 0, llm_s = 0 }
end
llm.reset_totals()

--- fn(record) is called once for every chat call (nil to stop) of a
--- client without a ledger of its own (`client.ledger = fn`: a run's
--- client, so concurrent runs in one process, as in a bench, each log only
--- their own calls).
---@param fn function|nil
function llm.set_ledger(fn)
  if fn ~= nil and type(fn) ~= "function" then error("llm.set_ledger: expected a function or nil", 2) end
  ledger_fn = fn
end

--- A copy of the totals since start (or reset_totals): calls, errors,
--- cached_calls, input_tokens, output_tokens, thinking_tokens, cost_usd
--- (replayed calls count what they cost when recorded, so budgets replay
--- identically), billed_usd (money actually spent now), llm_s.
function llm.totals()
  local t = {}
  for k, v in pairs(totals) do t[k] = v end
  return t
end

local function record(client, req, r, err, attempts, latency)
  local u = r and r.usage or {}
  totals.calls = totals.calls + 1
  totals.llm_s = totals.llm_s + latency
  if r then
    totals.input_tokens = totals.input_tokens + (u.input_tokens or 0)
    totals.output_tokens = totals.output_tokens + (u.output_tokens or 0)
    totals.thinking_tokens = totals.thinking_tokens + (u.thinking_tokens or 0)
    totals.cost_usd = totals.cost_usd + (r.cost_usd or 0)
    if r.cached then totals.cached_calls = totals.cached_calls + 1
    else totals.billed_usd = totals.billed_usd + (r.cost_usd or 0) end
  else
    totals.errors = totals.errors + 1
  end
  -- the client's own ledger (one run's), else the process-wide one
  local sink = client.ledger or ledger_fn
  if sink then
    sink {
      type = "llm_call", provider = client.provider, model = client.model, label = client.label,
      input_tokens = u.input_tokens or 0, output_tokens = u.output_tokens or 0,
      thinking_tokens = u.thinking_tokens or 0, cost_usd = r and r.cost_usd or 0,
      latency_s = latency, attempts = attempts, cached = r and r.cached or false,
      finish_reason = r and r.finish_reason or nil,
      error = err and err.kind or nil, error_message = err and err.message or nil,
      meta = req.meta,
    }
  end
end

-- ---- prices ----------------------------------------------------------------

--- USD per million tokens for a model name: {input, output} or nil. The
--- longest key of the price table that prefixes the name wins; a vendor
--- prefix ("openai/gpt-4o", "models/gemini-2.5-pro") is ignored.
---@param model string
function llm.price(model)
  if type(model) ~= "string" then return nil end
  local names = { model, model:match("([^/]+)$") }
  local best, blen
  for _, name in ipairs(names) do
    for k, p in pairs(prices) do
      if name:sub(1, #k) == k and (not blen or #k > blen) then
        local nxt = name:sub(#k + 1, #k + 1)
        if nxt == "" or nxt == "-" or nxt == "@" or nxt == ":" then best, blen = p, #k end
      end
    end
  end
  return best
end

--- Add or replace entries of the price table.
function llm.set_prices(tbl)
  for k, v in pairs(tbl) do prices[k] = v end
end

local function cost(price, u)
  if not price then return 0 end
  return ((u.input_tokens or 0) * (price.input or 0) + (u.output_tokens or 0) * (price.output or 0)) / 1e6
end

-- ---- client ------------------------------------------------------------------

local Client = {}
Client.__index = Client

-- how many answers to each canonical request were asked for (per cache
-- dir): the n-th identical request gets sample index n-1
local sample_counts = {}

--- Start sample indices from 0 again, as a new process would (a replay in
--- the same process as its recording, a fresh run in a suite that must
--- see the same samples).
function llm.reset_samples() sample_counts = {} end

local function strip_slash(s) return (s:gsub("/+$", "")) end

local function first_env(names)
  if type(names) == "string" then names = { names } end
  for _, n in ipairs(names or {}) do
    local v = os.getenv(n)
    if v and v ~= "" then return v, n end
  end
  return nil
end

--- Make a client. See docs/api/llm.md for every option and its default.
---@param opts table {provider, model, base_url, api_key_env, max_concurrency=16, timeout=300,
---  connect_timeout=30, stall_timeout=60, give_up_after=300, max_retries=6, backoff_base=1, backoff_max=60,
---  max_retry_wait=300, max_response_bytes=32 MiB, rpm, tpm, price, cache="off", cache_dir, max_tokens,
---  extra_body, headers}
function llm.client(opts)
  if type(opts) ~= "table" then error("llm.client: expected a table of options", 2) end
  local name = opts.provider
  if type(name) ~= "string" then error("llm.client: option 'provider' is required", 2) end
  local impl = provider_impl(name)
  if not impl then
    error(input_error(string.format("unknown model provider '%s' (known: %s)", name, table.concat(llm.providers(), ", "))), 2)
  end
  local c = setmetatable({}, Client)
  for k, v in pairs(opts) do c[k] = v end
  c.impl = impl
  if name == "exec" then
    c.command = opts.command or opts.model
    if type(c.command) ~= "string" or c.command == "" then error("llm.client: exec needs a command (exec:COMMAND)", 2) end
    c.model = opts.model or c.command
  elseif c.model ~= nil and type(c.model) ~= "string" then
    error("llm.client: option 'model' must be a string", 2)
  end
  if impl.default_base_url then
    if not c.model or c.model == "" then error("llm.client: option 'model' is required for " .. name, 2) end
    c.base_url = strip_slash(opts.base_url or first_env(impl.base_url_env) or impl.default_base_url)
    c.api_key_env = opts.api_key_env or impl.api_key_env
    -- a vendor endpoint needs a key; a local server (vLLM, Ollama) may not
    c.requires_key = opts.requires_key
    if c.requires_key == nil then c.requires_key = c.base_url == impl.default_base_url end
  end
  c.max_concurrency = opts.max_concurrency or 16
  if math.type(c.max_concurrency) ~= "integer" or c.max_concurrency < 1 then
    error("llm.client: max_concurrency must be an integer >= 1", 2)
  end
  -- a stalled endpoint is given up within about give_up_after seconds in
  -- all: one non-streaming attempt, or a few streaming ones
  c.timeout = opts.timeout or 300
  c.connect_timeout = opts.connect_timeout or 30
  c.stall_timeout = opts.stall_timeout or math.min(60, c.timeout)
  c.give_up_after = opts.give_up_after or 300
  c.max_response_bytes = opts.max_response_bytes or (32 << 20)
  c.max_retries = opts.max_retries or 6
  c.backoff_base = opts.backoff_base or 1
  c.backoff_max = opts.backoff_max or 60
  c.max_retry_wait = opts.max_retry_wait or 300
  c.cache = opts.cache or "off"
  if c.cache ~= "rw" and c.cache ~= "ro" and c.cache ~= "off" then
    error("llm.client: cache must be 'rw', 'ro' or 'off', got " .. tostring(c.cache), 2)
  end
  c.cache_dir = opts.cache_dir or cache.default_dir()
  -- a provider that is no vendor's (the simulated model) may name the model it is priced as
  c.price = opts.price or llm.price(c.model) or (impl.price_model and llm.price(impl.price_model))
  local label = impl.label
  if type(label) == "function" then label = label(c) end
  c.label = opts.label or label or (name .. ":" .. tostring(c.model or ""))
  c.sem = task.semaphore(c.max_concurrency)
  c.window = {} -- {t, tokens} of calls in the last minute (rpm / tpm)
  return c
end

local function estimate_tokens(req)
  local n = #(req.system or "")
  for _, m in ipairs(req.messages or {}) do n = n + #tostring(type(m.content) == "string" and m.content or "") end
  return math.ceil(n / 4)
end

-- Wait until a call fits the requests/min and tokens/min limits.
local function throttle(c, tokens)
  if not c.rpm and not c.tpm then return nil end
  while true do
    local now = task.now()
    local w, keep, used = c.window, {}, 0
    for _, e in ipairs(w) do
      if now - e.t < 60 then
        keep[#keep + 1] = e
        used = used + e.tokens
      end
    end
    c.window = keep
    local ok_r = not c.rpm or #keep < c.rpm
    local ok_t = not c.tpm or #keep == 0 or used + tokens <= c.tpm
    if ok_r and ok_t then
      local e = { t = now, tokens = tokens }
      keep[#keep + 1] = e
      return e
    end
    task.sleep(math.max(0.01, keep[1].t + 60 - now))
  end
end

local function redact(err, key)
  if key and type(err.message) == "string" then
    local s, e = err.message:find(key, 1, true)
    while s do
      err.message = err.message:sub(1, s - 1) .. "[redacted]" .. err.message:sub(e + 1)
      s, e = err.message:find(key, 1, true)
    end
  end
  return err
end

local function check_req(req)
  if type(req) ~= "table" then error("client:chat: expected a request table", 3) end
  if type(req.messages) ~= "table" or #req.messages == 0 then
    error("client:chat: messages must be a non-empty list of {role =, content =}", 3)
  end
  for i, m in ipairs(req.messages) do
    if type(m) ~= "table" or (type(m.content) ~= "string" and type(m.content) ~= "table") then
      error("client:chat: messages[" .. i .. "] needs a string content", 3)
    end
  end
  if req.system ~= nil and type(req.system) ~= "string" then error("client:chat: system must be a string", 3) end
  if req.on_delta ~= nil and type(req.on_delta) ~= "function" then error("client:chat: on_delta must be a function", 3) end
end

function Client:key()
  local envs = self.api_key_env
  if not envs then return nil end
  return first_env(envs)
end

--- Where this client's calls go, for messages and cache keys: the base URL
--- without user or password (a URL may carry them), "exec:COMMAND", or the
--- provider's name for a Lua provider. Never the API key.
function Client:endpoint()
  if self.base_url then return (self.base_url:gsub("^(%a[%w+.-]*://)[^/@]*@", "%1")) end
  if self.command then return "exec:" .. self.command end
  return self.provider
end

local function env_name(envs)
  if type(envs) == "table" then return table.concat(envs, " or ") end
  return tostring(envs)
end

-- The attempts loop: one call through the provider, retried per policy.
function Client:attempts(req)
  local attempt, t0 = 0, task.now()
  while true do
    attempt = attempt + 1
    local key = self:key()
    if not key and self.requires_key then
      return nil, { kind = "auth", retryable = false,
        message = string.format("%s: no API key: set %s", self.provider, env_name(self.api_key_env)) }, attempt
    end
    local resp, err = self.impl.call(self, req, { key = key, attempt = attempt })
    if resp then return resp, nil, attempt end
    if type(err) ~= "table" then err = { kind = "bad_response", message = tostring(err) } end
    err.kind = err.kind or "bad_response"
    err.message = err.message or err.kind
    redact(err, key)
    local retryable = err.retryable
    if retryable == nil then retryable = retry.retryable_kinds[err.kind] or false end
    if retryable and err.kind == "timeout" and task.now() - t0 >= self.give_up_after then
      err.message = string.format("%s (gave up: no answer within give_up_after = %gs over %d attempts)",
        err.message, self.give_up_after, attempt)
      return nil, err, attempt
    end
    if not retryable or attempt > self.max_retries then
      if retryable then
        err.message = string.format("%s (gave up after %d attempts)", err.message, attempt)
      end
      return nil, err, attempt
    end
    local wait = err.retry_after
    if wait and wait > self.max_retry_wait then
      err.message = string.format("%s (the server asks to wait %gs, more than max_retry_wait = %gs)",
        err.message, wait, self.max_retry_wait)
      return nil, err, attempt
    end
    task.sleep(wait or retry.backoff(attempt, self.backoff_base, self.backoff_max))
  end
end

local function copy_resp(r)
  local u = r.usage or {}
  return {
    text = r.text or "", thinking = r.thinking or "", finish_reason = r.finish_reason,
    usage = {
      input_tokens = math.tointeger(u.input_tokens) or 0,
      output_tokens = math.tointeger(u.output_tokens) or 0,
      thinking_tokens = math.tointeger(u.thinking_tokens) or 0,
    },
    model = r.model,
  }
end

-- on_delta for a call that may be retried: a retried stream starts over,
-- so the text an earlier attempt already delivered is not delivered again;
-- an attempt that diverges from it is announced, then shown from its start.
local function once_delta(on_delta)
  local shown, cur, cur_attempt = {}, {}, nil
  return function(d, kind, attempt)
    if attempt ~= cur_attempt then cur, cur_attempt = {}, attempt end
    local now = (cur[kind] or "") .. d
    cur[kind] = now
    local old = shown[kind] or ""
    if #now <= #old then
      if old:sub(1, #now) == now then return end -- already shown
    elseif now:sub(1, #old) == old then
      shown[kind] = now
      return on_delta(now:sub(#old + 1), kind, attempt)
    end
    shown[kind] = now
    return on_delta("\n[the answer restarted after an error]\n" .. now, kind, attempt)
  end
end

--- Send a chat request; waits. Returns r | nil, err (see docs/api/llm.md).
---@param req table {system, messages, max_tokens, temperature, top_p, stop, thinking, stream, on_delta, extra, sample, meta}
function Client:chat(req)
  check_req(req)
  if req.on_delta then
    local r2 = {}
    for k, v in pairs(req) do r2[k] = v end
    r2.on_delta = once_delta(req.on_delta)
    req = r2
  end
  local t0 = task.now()
  local key, sample
  if self.cache ~= "off" then
    local canon = cache.canonical(self.provider, self.model, req, self:endpoint())
    sample = req.sample
    if sample == nil then
      local sk = self.cache_dir .. "\n" .. canon
      sample = sample_counts[sk] or 0
      sample_counts[sk] = sample + 1
    end
    key = cache.key(canon, sample)
    local e = cache.get(self.cache_dir, key)
    if e then
      local r = copy_resp(e.response)
      r.cached, r.attempts, r.cost_usd = true, 0, tonumber(e.cost_usd) or cost(self.price, r.usage)
      r.latency_s = task.now() - t0
      if req.on_delta then
        if r.thinking ~= "" then req.on_delta(r.thinking, "thinking", 0) end
        if r.text ~= "" then req.on_delta(r.text, "text", 0) end
      end
      record(self, req, r, nil, 0, r.latency_s)
      return r
    end
    if self.cache == "ro" then
      local err = { kind = "cache_miss", message = string.format(
        "%s: no recorded answer for this request (sample %d) in %s (cache = 'ro' replays only)",
        self.label, sample, self.cache_dir) }
      record(self, req, nil, err, 0, task.now() - t0)
      return nil, err
    end
  end

  self.sem:acquire()
  local ok, resp, err, attempts = pcall(function()
    local slot = throttle(self, estimate_tokens(req))
    local r, e, n = self:attempts(req)
    if slot and r then
      slot.tokens = (r.usage and (r.usage.input_tokens or 0) + (r.usage.output_tokens or 0)) or slot.tokens
    end
    return r, e, n
  end)
  self.sem:release()
  if not ok then error(resp, 0) end
  -- a provider that simulates its latency (the simulated model) reports it
  local latency = resp and resp.latency_s or (task.now() - t0)
  if not resp then
    err.attempts = attempts
    err.retryable = nil
    record(self, req, nil, err, attempts, latency)
    return nil, err
  end
  local r = copy_resp(resp)
  r.cost_usd = cost(self.price, r.usage)
  r.latency_s, r.attempts, r.cached = latency, attempts, false
  if self.cache == "rw" then
    cache.put(self.cache_dir, key, {
      version = cache.VERSION, provider = self.provider, model = self.model, sample = sample,
      response = { text = r.text, thinking = r.thinking, finish_reason = r.finish_reason, usage = r.usage, model = r.model },
      cost_usd = r.cost_usd, latency_s = latency, created = os.time(),
    })
  end
  record(self, req, r, nil, attempts, latency)
  return r
end

-- ---- model specs and config files ------------------------------------------

local function load_config(path)
  local env = setmetatable({}, { __index = { os = { getenv = os.getenv }, math = math, string = string,
    table = table, tonumber = tonumber, tostring = tostring, pairs = pairs, ipairs = ipairs } })
  local chunk, err = loadfile(path, "t", env)
  if not chunk then error(input_error("cannot load LLM config " .. path .. ": " .. tostring(err)), 0) end
  local ok, cfg = pcall(chunk)
  if not ok then error(input_error("error in LLM config " .. path .. ": " .. tostring(cfg)), 0) end
  if type(cfg) ~= "table" then error(input_error("LLM config " .. path .. " must return a table"), 0) end
  return cfg
end

local function merge(dst, src)
  if type(src) == "table" then
    for k, v in pairs(src) do dst[k] = v end
  end
  return dst
end

--- Split "PROVIDER:MODEL" (exec:COMMAND keeps everything after the first
--- colon; "scripted" alone is allowed). Returns provider, rest.
---@param spec string
function llm.parse_spec(spec)
  if type(spec) ~= "string" or spec == "" then error(input_error("empty model spec"), 2) end
  local p, rest = spec:match("^([%w_%-]+):(.*)$")
  if not p then return spec, nil end
  return p, rest
end

--- Whether the provider of a model spec answers offline (scripted, sim):
--- its calls are not worth caching.
---@param spec string
function llm.offline(spec)
  if type(spec) ~= "string" or spec == "" then return false end
  local impl = provider_impl((llm.parse_spec(spec)))
  return impl ~= nil and impl.offline == true
end

--- A client from a command-line model spec: "openai:gpt-5",
--- "gemini:gemini-2.5-pro", "anthropic:claude-sonnet-4-5", "exec:COMMAND",
--- "scripted", or an alias from the config file. opts: config_file (a Lua
--- file returning {defaults =, providers = {name = opts}, models = {spec_or_alias
--- = opts (spec = "p:m" makes an alias)}, prices = {}}), config (the same
--- table), cache, cache_dir, and any client option (highest priority).
---@param spec string
---@param opts table|nil
function llm.from_spec(spec, opts)
  opts = opts or {}
  local cfg = opts.config or (opts.config_file and load_config(opts.config_file)) or {}
  if cfg.prices then llm.set_prices(cfg.prices) end
  spec = spec or cfg.default
  local models = cfg.models or {}
  local alias = models[spec]
  if type(alias) == "table" and alias.spec then spec = alias.spec end
  local provider, rest = llm.parse_spec(spec)
  local o = merge({}, cfg.defaults)
  merge(o, (cfg.providers or {})[provider])
  merge(o, models[spec])
  if type(alias) == "table" then merge(o, alias) end
  o.spec = nil
  for k, v in pairs(opts) do
    if k ~= "config" and k ~= "config_file" then o[k] = v end
  end
  o.provider = provider
  if provider == "exec" then
    if not rest or rest == "" then error(input_error("exec needs a command: --model exec:COMMAND"), 2) end
    o.command, o.model = rest, rest
  elseif rest and rest ~= "" then
    o.model = rest
  elseif provider == "scripted" or provider == "sim" then
    o.model = o.model or provider
  end
  if not provider_impl(provider) then
    error(input_error(string.format("unknown model provider '%s' in '%s' (known: %s; write PROVIDER:MODEL)",
      provider, spec, table.concat(llm.providers(), ", "))), 2)
  end
  if provider_impl(provider).default_base_url and (not o.model or o.model == "") then
    error(input_error(string.format("model spec '%s' names no model: write %s:MODEL", spec, provider)), 2)
  end
  return llm.client(o)
end

return llm
