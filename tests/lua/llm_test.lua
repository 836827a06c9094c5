-- mk.services.llm end to end against the loopback fake server: every wire format
-- streaming and not, the fault injections, cache/replay, ledger, specs.
local fake = dofile("tests/fake_llm/fake.lua")
local rerun = fake.reexec_with_key()
if rerun then return rerun end -- the key must come from the environment

local t = dofile("tests/lua/lib/t.lua")
local llm = require "mk.services.llm"
local task = require "mk.services.task"
local fs = require "mk.fs"
local http = require "mk.http"

local srv = fake.start()
local tmp = t.tmpdir("mk-llm-test-")
local KEY = fake.key
local n_prompt = 0

-- a fresh prompt per call: the fake server counts attempts per prompt
local function prompt(words)
  n_prompt = n_prompt + 1
  return (words or "tell me") .. " p" .. n_prompt
end

local function client(provider, model, o)
  local opts = {
    provider = provider, model = model, api_key_env = fake.key_env,
    base_url = provider == "openai" and (srv.url .. "/v1") or srv.url,
    backoff_base = 0.01, max_retries = 3, timeout = 10,
  }
  for k, v in pairs(o or {}) do opts[k] = v end
  return llm.client(opts)
end

local function requests() return fake.stats(srv).requests end

local PROVIDERS = { "openai", "gemini", "anthropic" }

-- ---- the three wire formats --------------------------------------------------

for _, p in ipairs(PROVIDERS) do
  for _, stream in ipairs { false, true } do
    local mode = stream and "streaming" or "non-streaming"
    t.test(p .. " " .. mode .. ": text, usage and finish reason come back", function()
      local c = client(p, "ok")
      local deltas = {}
      local q = prompt("hello big world")
      local r, err = c:chat {
        system = "be brief", messages = { { role = "user", content = q } }, stream = stream,
        on_delta = function(d, kind) deltas[#deltas + 1] = { d, kind } end,
      }
      t.ok(r, err and err.message)
      t.eq(r.text, "echo: " .. q)
      t.eq(r.thinking, "")
      t.eq(r.finish_reason, "stop")
      t.eq(r.usage.input_tokens, 6) -- "be brief" + 4 words
      t.eq(math.type(r.usage.input_tokens), "integer")
      t.eq(r.usage.output_tokens, 5)
      t.eq(r.usage.thinking_tokens, 0)
      t.eq(r.attempts, 1)
      t.eq(r.cached, false)
      t.ok(r.latency_s >= 0)
      if stream then
        local s = {}
        for _, d in ipairs(deltas) do s[#s + 1] = d[1] end
        t.eq(table.concat(s), r.text, "deltas add up to the text")
        t.ok(#deltas >= 5, "one delta per word")
      else
        t.eq(#deltas, 0)
      end
    end)

    t.test(p .. " " .. mode .. ": thinking text and tokens are reported", function()
      local c = client(p, "think")
      local q = prompt("a b")
      local kinds = {}
      local r = assert(c:chat { messages = { { role = "user", content = q } }, stream = stream,
        thinking = { budget_tokens = 1024, effort = "low" },
        on_delta = function(_, kind) kinds[kind] = true end })
      t.eq(r.text, "echo: " .. q)
      t.eq(r.thinking, "thinking about: " .. q)
      -- output counts everything generated (visible + thinking)
      t.eq(r.usage.output_tokens, 4 + 5)
      -- Anthropic does not report thinking tokens separately
      t.eq(r.usage.thinking_tokens, p == "anthropic" and 0 or 5)
      if stream then t.ok(kinds.thinking and kinds.text) end
    end)
  end
end

t.test("a multi-turn conversation maps assistant turns for each provider", function()
  for _, p in ipairs(PROVIDERS) do
    local c = client(p, "ok")
    local r = assert(c:chat { messages = {
      { role = "user", content = "first question" },
      { role = "assistant", content = "first answer" },
      { role = "user", content = "second one" },
    } })
    t.eq(r.text, "echo: second one", p)
    t.eq(r.usage.input_tokens, 6, p)
  end
end)

-- ---- faults ------------------------------------------------------------------

local function fault(p, model, stream, o)
  local c = client(p, model, o)
  local t0 = task.now()
  local r, err = c:chat { messages = { { role = "user", content = prompt() } }, stream = stream }
  return r, err, task.now() - t0
end

for _, p in ipairs(PROVIDERS) do
  for _, stream in ipairs { false, true } do
    local mode = stream and "streaming" or "non-streaming"
    t.test(p .. " " .. mode .. ": 500 twice then success takes 3 attempts", function()
      local r, err = fault(p, "fault-500x2", stream)
      t.ok(r, err and err.message)
      t.eq(r.attempts, 3)
      t.matches(r.text, "^echo: ")
    end)
    t.test(p .. " " .. mode .. ": 529 overloaded is retried", function()
      local r = assert(fault(p, "fault-529", stream))
      t.eq(r.attempts, 2)
    end)
    t.test(p .. " " .. mode .. ": a stream or body cut mid-way is retried", function()
      local r = assert(fault(p, "fault-cut", stream))
      t.eq(r.attempts, 2)
      t.matches(r.text, "^echo: tell me p%d+$")
    end)
    t.test(p .. " " .. mode .. ": a connection always cut ends as network after max_retries", function()
      local r, err = fault(p, "fault-cutalways", stream, { max_retries = 2 })
      t.eq(r, nil)
      t.eq(err.kind, "network")
      t.eq(err.attempts, 3)
      t.contains(err.message, "gave up after 3 attempts")
    end)
    t.test(p .. " " .. mode .. ": a non-JSON 200 body is bad_response at once, no crash", function()
      local r, err = fault(p, "fault-nonjson", stream)
      t.eq(r, nil)
      t.eq(err.kind, "bad_response")
      t.eq(err.attempts, 1)
      t.contains(err.message, "not JSON")
      t.contains(err.message, "502 Bad Gateway")
    end)
    t.test(p .. " " .. mode .. ": a terminal quota error fails fast", function()
      local r, err = fault(p, "fault-quota", stream)
      t.eq(r, nil)
      t.eq(err.kind, "quota")
      t.eq(err.attempts, 1)
      t.contains(err.message, "retrying will not help")
    end)
    t.test(p .. " " .. mode .. ": a bad key is auth, not retried, and names the variable", function()
      local r, err = fault(p, "ok", stream, { api_key_env = "HOME" })
      t.eq(r, nil)
      t.eq(err.kind, "auth")
      t.eq(err.attempts, 1)
      t.contains(err.message, "HOME")
      t.eq(err.message:find(os.getenv("HOME"), 1, true), nil, "the key is not in the message")
    end)
  end
end

for _, p in ipairs(PROVIDERS) do
  t.test(p .. ": an error event in the middle of a stream is retried, deltas restart", function()
    local c = client(p, "fault-streamerror")
    local attempts_seen = {}
    local r, err = c:chat { messages = { { role = "user", content = prompt() } }, stream = true,
      on_delta = function(_, _, attempt) attempts_seen[attempt] = true end }
    t.ok(r, err and err.message)
    t.eq(r.attempts, 2)
    t.matches(r.text, "^echo: ")
    t.ok(attempts_seen[2], "deltas of the second attempt are marked 2")
  end)
end

t.test("parsers never raise on odd JSON, and name what is missing", function()
  local odd = { {}, { 1, 2 }, { choices = "x" }, { choices = { 7 } }, { choices = { { message = 3 } } },
    { candidates = { { content = { parts = { 5, { text = 9 } } } } } }, { content = "s" }, { content = { 1 } },
    { usage = "many" }, { usageMetadata = { promptTokenCount = "a" } }, { error = 5 } }
  for _, p in ipairs(PROVIDERS) do
    local W = require("mk.services.llm.providers." .. p)
    local c = { provider = p, model = "m" }
    for i, o in ipairs(odd) do
      local ok, r, err = pcall(W.parse, c, o)
      t.ok(ok, p .. " parse raised on case " .. i .. ": " .. tostring(r))
      t.ok(r or (err and err.kind == "bad_response"), p .. " case " .. i)
      local st = W.stream(c, {}, function() end)
      for _, data in ipairs { "[1]", "3", "null", '"s"', "{}", '{"choices": [{"delta": 4}]}', '{"delta": "x"}', "{bad" } do
        local ok2, e2 = pcall(st.event, st, "message", data)
        t.ok(ok2, p .. " stream event raised on " .. data .. ": " .. tostring(e2))
      end
      local ok3 = pcall(st.result, st)
      t.ok(ok3)
    end
  end
end)

t.test("429 with retry-after: 1 waits about a second, then succeeds", function()
  local r, err, dt = fault("openai", "fault-429", true)
  t.ok(r, err and err.message)
  t.eq(r.attempts, 2)
  t.ok(dt >= 0.95, "honoured retry-after (waited " .. dt .. " s)")
end)

t.test("429 with retry-after-ms is honoured (anthropic)", function()
  local r, _, dt = fault("anthropic", "fault-429ms", false)
  t.eq(r.attempts, 2)
  t.ok(dt >= 0.19, "waited " .. dt)
end)

t.test("Gemini RetryInfo.retryDelay in the 429 body is honoured", function()
  local r, _, dt = fault("gemini", "fault-retryinfo", true)
  t.eq(r.attempts, 2)
  t.ok(dt >= 0.29, "waited " .. dt)
end)

t.test("a wait longer than max_retry_wait fails as rate_limit instead of sleeping", function()
  local r, err = fault("openai", "fault-429", false, { max_retry_wait = 0.5 })
  t.eq(r, nil)
  t.eq(err.kind, "rate_limit")
  t.eq(err.attempts, 1)
  t.contains(err.message, "max_retry_wait")
end)

t.test("an answer slower than the timeout ends as timeout after the retries, in bounded time", function()
  local r, err, dt = fault("gemini", "fault-slow", false, { timeout = 0.4, max_retries = 1 })
  t.eq(r, nil)
  t.eq(err.kind, "timeout")
  t.eq(err.attempts, 2)
  t.ok(dt < 8, "did not wait for the slow answer (" .. dt .. " s)")
end)

t.test("max_retries = 0 means one attempt", function()
  local r, err = fault("openai", "fault-500x2", false, { max_retries = 0 })
  t.eq(r, nil)
  t.eq(err.kind, "server")
  t.eq(err.status, 500)
  t.eq(err.attempts, 1)
end)

t.test("a missing key for a vendor endpoint fails before any request", function()
  local before = requests()
  local c = llm.client { provider = "anthropic", model = "claude-x", api_key_env = "MK_NO_SUCH_KEY_VAR" }
  local r, err = c:chat { messages = { { role = "user", content = "hi" } } }
  t.eq(r, nil)
  t.eq(err.kind, "auth")
  t.contains(err.message, "MK_NO_SUCH_KEY_VAR")
  t.eq(requests(), before)
end)

t.test("a refused connection is network and is retried", function()
  local c = llm.client { provider = "openai", model = "m", base_url = "http://127.0.0.1:1/v1",
    api_key_env = fake.key_env, backoff_base = 0.01, max_retries = 2 }
  local r, err = c:chat { messages = { { role = "user", content = "hi" } } }
  t.eq(r, nil)
  t.eq(err.kind, "network")
  t.eq(err.attempts, 3)
end)

-- ---- cache and replay --------------------------------------------------------

local function grep_dir(dir, needle)
  local hits = {}
  local function walk(d)
    for _, name in ipairs(fs.list(d) or {}) do
      local p = d .. "/" .. name
      if fs.isdir(p) then walk(p)
      else
        local data = fs.read(p) or ""
        if data:find(needle, 1, true) then hits[#hits + 1] = p end
      end
    end
  end
  walk(dir)
  return hits
end

local function count_files(dir)
  local n = 0
  local function walk(d)
    for _, name in ipairs(fs.list(d) or {}) do
      local p = d .. "/" .. name
      if fs.isdir(p) then walk(p) else n = n + 1 end
    end
  end
  walk(dir)
  return n
end

t.test("a recorded run replays with zero HTTP requests and the same answers", function()
  local dir = tmp .. "/cache1"
  local q1, q2 = prompt("first"), prompt("second")
  local rec = {}
  for _, p in ipairs(PROVIDERS) do
    local c = client(p, "think", { cache = "rw", cache_dir = dir, price = { input = 1, output = 2 } })
    for i, q in ipairs { q1, q2, q1 } do
      local r = assert(c:chat { messages = { { role = "user", content = q } }, stream = i == 2 })
      t.eq(r.cached, false)
      rec[#rec + 1] = r
    end
  end
  t.eq(count_files(dir), 9, "one entry per call: the repeated prompt is a second sample")
  llm.reset_samples() -- as a new process replaying the run would
  local before = requests()
  local i = 0
  for _, p in ipairs(PROVIDERS) do
    local c = client(p, "think", { cache = "ro", cache_dir = dir, price = { input = 1, output = 2 } })
    for j, q in ipairs { q1, q2, q1 } do
      i = i + 1
      local deltas = {}
      local r, err = c:chat { messages = { { role = "user", content = q } }, stream = j == 2,
        on_delta = function(d) deltas[#deltas + 1] = d end }
      t.ok(r, err and err.message)
      t.eq(r.cached, true)
      t.eq(r.attempts, 0)
      t.eq(r.text, rec[i].text)
      t.eq(r.thinking, rec[i].thinking)
      t.same(r.usage, rec[i].usage)
      t.near(r.cost_usd, rec[i].cost_usd, 1e-12)
      t.eq(table.concat(deltas), r.thinking .. r.text, "on_delta gets the replayed answer")
    end
  end
  t.eq(requests(), before, "replay made no HTTP request")
  t.eq(#grep_dir(dir, KEY), 0, "the key is in no cache entry")
end)

t.test("replay of a request never recorded is cache_miss, without a request", function()
  local before = requests()
  local c = client("openai", "ok", { cache = "ro", cache_dir = tmp .. "/empty" })
  local r, err = c:chat { messages = { { role = "user", content = prompt() } } }
  t.eq(r, nil)
  t.eq(err.kind, "cache_miss")
  t.eq(requests(), before)
end)

t.test("the sample index keeps N samples of one prompt distinct and can be set", function()
  local dir = tmp .. "/cache2"
  local c = client("openai", "ok", { cache = "rw", cache_dir = dir })
  local q = prompt()
  for _ = 1, 3 do assert(c:chat { messages = { { role = "user", content = q } } }) end
  t.eq(count_files(dir), 3)
  llm.reset_samples()
  local ro = client("openai", "ok", { cache = "ro", cache_dir = dir })
  t.ok(ro:chat { messages = { { role = "user", content = q } }, sample = 2 })
  local _, err = ro:chat { messages = { { role = "user", content = q } }, sample = 3 }
  t.eq(err.kind, "cache_miss")
end)

t.test("the endpoint is part of the cache key: another server's answers are never replayed", function()
  local dir = tmp .. "/cache-endpoint"
  local q = prompt()
  local c = client("openai", "ok", { cache = "rw", cache_dir = dir })
  assert(c:chat { messages = { { role = "user", content = q } }, sample = 0 })
  -- the same request, the same model, another base URL (a port nothing listens on)
  local other = client("openai", "ok", { cache = "ro", cache_dir = dir, base_url = "http://127.0.0.1:9/v1" })
  local r, err = other:chat { messages = { { role = "user", content = q } }, sample = 0 }
  t.eq(r, nil)
  t.eq(err.kind, "cache_miss", "replayed for another endpoint")
  -- credentials in a URL are no part of the endpoint, and so of no key
  local with_user = client("openai", "ok", { cache = "ro", cache_dir = dir,
    base_url = srv.url:gsub("^http://", "http://user:secret@") .. "/v1" })
  t.eq(with_user:endpoint(), srv.url .. "/v1")
  r = assert(with_user:chat { messages = { { role = "user", content = q } }, sample = 0 })
  t.eq(r.cached, true)
  t.eq(#grep_dir(dir, "secret"), 0)
  t.eq(#grep_dir(dir, "127.0.0.1"), 0, "no URL in an entry")
end)

t.test("meta, stream and on_delta do not change the cache key", function()
  local dir = tmp .. "/cache3"
  local q = prompt()
  local c = client("gemini", "ok", { cache = "rw", cache_dir = dir })
  assert(c:chat { messages = { { role = "user", content = q } }, meta = { agent = "plan" }, sample = 0 })
  local ro = client("gemini", "ok", { cache = "ro", cache_dir = dir })
  local r = assert(ro:chat { messages = { { role = "user", content = q } }, stream = true,
    meta = { agent = "other" }, on_delta = function() end, sample = 0 })
  t.eq(r.cached, true)
  local _, err = ro:chat { messages = { { role = "user", content = q } }, temperature = 0.1, sample = 0 }
  t.eq(err.kind, "cache_miss", "temperature is part of the key")
end)

-- ---- ledger, totals, prices ---------------------------------------------------

t.test("the ledger gets one record per call and totals add up", function()
  local records = {}
  llm.set_ledger(function(rec) records[#records + 1] = rec end)
  llm.reset_totals()
  local c = client("openai", "ok", { price = { input = 2, output = 10 } })
  local r = assert(c:chat { messages = { { role = "user", content = prompt("x y") } }, meta = { agent = "plan" } })
  local _, err = client("openai", "fault-quota"):chat { messages = { { role = "user", content = prompt() } } }
  llm.set_ledger(nil)
  t.eq(err.kind, "quota")
  t.eq(#records, 2)
  local a = records[1]
  t.eq(a.provider, "openai")
  t.eq(a.model, "ok")
  t.eq(a.label, "openai:ok")
  t.eq(a.input_tokens, 3)
  t.eq(a.output_tokens, 4)
  t.eq(a.attempts, 1)
  t.eq(a.cached, false)
  t.eq(a.error, nil)
  t.eq(a.meta.agent, "plan")
  t.near(a.cost_usd, (3 * 2 + 4 * 10) / 1e6, 1e-15)
  t.near(r.cost_usd, a.cost_usd, 1e-15)
  t.eq(records[2].error, "quota")
  local tot = llm.totals()
  t.eq(tot.calls, 2)
  t.eq(tot.errors, 1)
  t.eq(tot.input_tokens, 3)
  t.eq(tot.output_tokens, 4)
  t.near(tot.cost_usd, a.cost_usd, 1e-15)
  t.near(tot.billed_usd, a.cost_usd, 1e-15)
  t.ok(tot.llm_s > 0)
  local f = tmp .. "/ledger.jsonl"
  for _, rec in ipairs(records) do fs.append(f, require("cjson").encode(rec) .. "\n") end
  t.eq(#grep_dir(tmp, KEY), 0, "the key is in no ledger record")
end)

t.test("prices come from the table by longest model-name prefix", function()
  t.same(llm.price("claude-sonnet-4-5-20250929"), { input = 3, output = 15 })
  t.same(llm.price("gpt-4o-mini-2024-07-18"), { input = 0.15, output = 0.6 })
  t.same(llm.price("openai/gpt-4o"), { input = 2.5, output = 10 })
  t.eq(llm.price("gpt-4ox"), nil)
  t.eq(llm.price("no-such-model"), nil)
  local c = llm.client { provider = "gemini", model = "gemini-2.5-pro" }
  t.same(c.price, { input = 1.25, output = 10 })
end)

-- ---- providers in Lua, concurrency, cancellation -------------------------------

t.test("a registered provider goes through retries, ledger and label", function()
  local calls = 0
  llm.register_provider("flaky_test", {
    label = "flaky test double",
    call = function(cl, req)
      calls = calls + 1
      t.eq(req.meta.step, 7, "meta reaches the provider")
      t.eq(cl.model, "m1")
      if calls < 3 then return nil, { kind = "rate_limit", message = "slow down" } end
      return { text = "done", finish_reason = "stop", usage = { input_tokens = 10, output_tokens = 2 } }
    end,
  })
  local seen
  llm.set_ledger(function(rec) seen = rec end)
  local c = llm.client { provider = "flaky_test", model = "m1", backoff_base = 0.001, price = { input = 1, output = 1 } }
  t.eq(c.label, "flaky test double")
  local r = assert(c:chat { messages = { { role = "user", content = "go" } }, meta = { step = 7 } })
  llm.set_ledger(nil)
  t.eq(r.text, "done")
  t.eq(r.attempts, 3)
  t.eq(r.thinking, "")
  t.eq(r.usage.thinking_tokens, 0)
  t.eq(seen.attempts, 3)
  t.eq(seen.label, "flaky test double")
  t.near(r.cost_usd, 12 / 1e6, 1e-15)
end)

t.test("the key is redacted from any error message", function()
  llm.register_provider("leaky_test", {
    call = function(_, _, ctx) return nil, { kind = "bad_request", message = "rejected key " .. tostring(ctx.key) } end,
  })
  local c = llm.client { provider = "leaky_test", model = "m", api_key_env = fake.key_env }
  local _, err = c:chat { messages = { { role = "user", content = "x" } } }
  t.eq(err.kind, "bad_request")
  t.eq(err.message:find(KEY, 1, true), nil)
  t.contains(err.message, "[redacted]")
end)

t.test("max_concurrency bounds the calls in flight; the rest queue", function()
  local inflight, peak = 0, 0
  llm.register_provider("slow_test", {
    call = function()
      inflight = inflight + 1
      peak = math.max(peak, inflight)
      task.sleep(0.02)
      inflight = inflight - 1
      return { text = "ok", usage = { input_tokens = 1, output_tokens = 1 } }
    end,
  })
  local c = llm.client { provider = "slow_test", model = "m", max_concurrency = 3 }
  local hs = {}
  for i = 1, 12 do
    hs[i] = task.spawn(function() return (assert(c:chat { messages = { { role = "user", content = "q" .. i } } })).text end)
  end
  local out = task.gather(hs)
  t.eq(#out, 12)
  t.eq(peak, 3)
end)

t.test("rpm spaces calls out once the per-minute budget is used", function()
  llm.register_provider("count_test", { call = function() return { text = "ok", usage = {} } end })
  local c = llm.client { provider = "count_test", model = "m", rpm = 2 }
  assert(c:chat { messages = { { role = "user", content = "1" } } })
  assert(c:chat { messages = { { role = "user", content = "2" } } })
  local ok = task.timeout(0.3, function() return c:chat { messages = { { role = "user", content = "3" } } } end)
  t.eq(ok, nil, "the third call waits for the minute to pass")
end)

t.test("tpm holds calls back once the minute's tokens are used", function()
  llm.register_provider("tokens_test", { call = function() return { text = "ok", usage = { input_tokens = 6, output_tokens = 4 } } end })
  local c = llm.client { provider = "tokens_test", model = "m", tpm = 10 }
  assert(c:chat { messages = { { role = "user", content = "1" } } })
  local ok = task.timeout(0.3, function() return c:chat { messages = { { role = "user", content = "2" } } } end)
  t.eq(ok, nil, "10 tokens were used: the next call waits")
  local c2 = llm.client { provider = "tokens_test", model = "m", tpm = 1000 }
  assert(c2:chat { messages = { { role = "user", content = "1" } } })
  t.eq((task.timeout(5, function() return c2:chat { messages = { { role = "user", content = "2" } } } end)), true)
end)

t.test("cancelling a task in chat aborts the HTTP call and frees its slot", function()
  local c = client("openai", "delay-5000", { max_concurrency = 1 })
  local h = task.spawn(function() return c:chat { messages = { { role = "user", content = prompt() } }, stream = true } end)
  task.sleep(0.2)
  h:cancel()
  t.eq((task.try_await(h)), false)
  local live, running = http.live()
  t.eq(live, 0)
  t.eq(running, 0)
  -- the slot is free again: a second call on the same client goes through
  local ok2, r = task.timeout(5, function() return c.sem:acquire() end)
  t.eq(ok2, true, "semaphore slot released")
  c.sem:release()
  t.eq(r, nil)
end)

-- ---- exec provider -------------------------------------------------------------

t.test("exec: the request arrives as JSON on stdin, stdout is the reply", function()
  local c = llm.client { provider = "exec", command = "python3 -c 'import json,sys; r=json.load(sys.stdin); " ..
    "print(r[\"model\"] + \"|\" + r[\"system\"] + \"|\" + r[\"messages\"][-1][\"content\"], end=\"\")'" }
  local r, err = c:chat { system = "sys", messages = { { role = "user", content = "hello exec" } } }
  t.ok(r, err and err.message)
  t.eq(r.text, c.command .. "|sys|hello exec")
  t.eq(r.attempts, 1)
  t.ok(r.usage.input_tokens > 0, "token counts are estimated")
end)

t.test("exec: a JSON object on stdout gives text, thinking and usage", function()
  local c = llm.from_spec("exec:cat >/dev/null; echo '{\"text\": \"hi\", \"thinking\": \"hm\", "
    .. "\"usage\": {\"input_tokens\": 7, \"output_tokens\": 3}}'")
  local r = assert(c:chat { messages = { { role = "user", content = "x" } } })
  t.eq(r.text, "hi")
  t.eq(r.thinking, "hm")
  t.eq(r.usage.input_tokens, 7)
  t.eq(r.usage.output_tokens, 3)
end)

t.test("exec: a failing command is retried; a missing one fails at once", function()
  local c = llm.client { provider = "exec", command = "cat >/dev/null; echo boom >&2; exit 3",
    max_retries = 1, backoff_base = 0.001 }
  local r, err = c:chat { messages = { { role = "user", content = "x" } } }
  t.eq(r, nil)
  t.eq(err.kind, "server")
  t.eq(err.attempts, 2)
  t.contains(err.message, "boom")
  local c2 = llm.client { provider = "exec", command = "/no/such/llm-cli" }
  local _, err2 = c2:chat { messages = { { role = "user", content = "x" } } }
  t.eq(err2.kind, "bad_request")
  t.eq(err2.attempts, 1)
end)

t.test("exec: timeout kills the command", function()
  local c = llm.client { provider = "exec", command = "sleep 30", timeout = 0.3, max_retries = 0 }
  local t0 = task.now()
  local _, err = c:chat { messages = { { role = "user", content = "x" } } }
  t.eq(err.kind, "timeout")
  t.ok(task.now() - t0 < 10, "the command was killed, not awaited")
end)

-- ---- model specs -----------------------------------------------------------------

t.test("from_spec parses PROVIDER:MODEL with keys and base URLs from the environment", function()
  local c = llm.from_spec("openai:gpt-4o-mini")
  t.eq(c.provider, "openai")
  t.eq(c.model, "gpt-4o-mini")
  t.eq(c.label, "openai:gpt-4o-mini")
  t.eq(c.base_url, os.getenv("OPENAI_BASE_URL") or "https://api.openai.com/v1")
  t.eq(c.api_key_env, "OPENAI_API_KEY")
  local g = llm.from_spec("gemini:gemini-2.5-flash", { cache = "ro", cache_dir = tmp .. "/x" })
  t.eq(g.cache, "ro")
  t.eq(g.cache_dir, tmp .. "/x")
  t.same(g.api_key_env, { "GEMINI_API_KEY", "GOOGLE_API_KEY" })
  local a = llm.from_spec("anthropic:claude-sonnet-4-5")
  t.eq(a.base_url, os.getenv("ANTHROPIC_BASE_URL") or "https://api.anthropic.com")
  local e = llm.from_spec("exec:my-llm --fast")
  t.eq(e.command, "my-llm --fast")
  t.eq(e.label, "exec:my-llm --fast")
end)

t.test("from_spec rejects unknown providers and missing models with kind bad_request", function()
  local err = t.raises(function() llm.from_spec("frobnicate:x1") end, "unknown model provider 'frobnicate'")
  t.eq(err.kind, "bad_request")
  local err2 = t.raises(function() llm.from_spec("openai:") end, "names no model")
  t.eq(err2.kind, "bad_request")
  t.raises(function() llm.from_spec("exec:") end, "exec needs a command")
  -- helper modules of the providers' folder are not providers
  for _, name in ipairs { "transport", "json", "retry", "sse" } do
    t.raises(function() llm.client { provider = name, model = "m" } end, "unknown model provider '" .. name .. "'")
  end
end)

t.test("from_spec finds providers in the registry (the scripted model's path)", function()
  llm.register_provider("offline_test", { label = "offline double", call = function() return { text = "s" } end })
  local c = llm.from_spec("offline_test")
  t.eq(c.provider, "offline_test")
  t.eq(c.label, "offline double")
  t.eq((assert(c:chat { messages = { { role = "user", content = "x" } } })).text, "s")
end)

t.test("from_spec reads an --llm-config file: defaults, aliases, prices", function()
  local f = tmp .. "/llm_config.lua"
  fs.write(f, [[
return {
  defaults = { max_concurrency = 4, timeout = 120 },
  providers = { openai = { base_url = "http://127.0.0.1:9/v1" } },
  models = {
    fast = { spec = "openai:tiny-1", max_retries = 2 },
    ["anthropic:claude-x"] = { price = { input = 9, output = 99 } },
  },
  prices = { ["tiny-1"] = { input = 0.5, output = 1.5 } },
}
]])
  local c = llm.from_spec("fast", { config_file = f })
  t.eq(c.provider, "openai")
  t.eq(c.model, "tiny-1")
  t.eq(c.base_url, "http://127.0.0.1:9/v1")
  t.eq(c.max_concurrency, 4)
  t.eq(c.timeout, 120)
  t.eq(c.max_retries, 2)
  t.same(c.price, { input = 0.5, output = 1.5 })
  local a = llm.from_spec("anthropic:claude-x", { config_file = f })
  t.same(a.price, { input = 9, output = 99 })
  t.raises(function() llm.from_spec("fast", { config_file = tmp .. "/missing.lua" }) end, "cannot load LLM config")
end)

t.test("mkengine ask sends one prompt and prints the answer and its cost", function()
  local f = tmp .. "/ask_config.lua"
  fs.write(f, string.format([[
return { providers = { anthropic = { base_url = %q, api_key_env = %q, price = { input = 1e6, output = 2e6 } } } }
]], srv.url, fake.key_env))
  local exe = os.getenv("MKENGINE_BUILD") .. "/mkengine"
  local p = io.popen(string.format("%q ask --model anthropic:ok --llm-config %q --stream 'hi from ask' 2>&1", exe, f))
  local out = p:read("a")
  p:close()
  t.contains(out, "echo: hi from ask")
  t.contains(out, "echo: hi from ask\n[anthropic:ok: 3 in, 4 out (0 thinking) tokens, $11.000000")
  p = io.popen(string.format("%q ask --model anthropic:fault-quota --llm-config %q 'x y' 2>&1; echo rc=$?", exe, f))
  out = p:read("a")
  p:close()
  t.contains(out, "quota: anthropic: HTTP 402")
  t.contains(out, "rc=1")
end)

t.test("a stream ending with [DONE] on a connection held open ends at [DONE], not at a stall", function()
  local c = client("openai", "fault-doneopen", { stall_timeout = 5, timeout = 20 })
  local q = prompt("done but open")
  local t0 = task.now()
  local r, err = c:chat { messages = { { role = "user", content = q } }, stream = true }
  t.ok(r, err and err.message)
  t.eq(r.text, "echo: " .. q)
  t.eq(r.attempts, 1)
  t.ok(task.now() - t0 < 3, "returned at [DONE] (" .. (task.now() - t0) .. " s)")
  t.ok(select(1, http.live()) == 0, "the held-open transfer was closed")
end)

t.test("a retried stream does not deliver the text of the first attempt again", function()
  local c = client("openai", "fault-stallmid", { stall_timeout = 0.5 })
  local q = prompt("Hello there")
  local out = {}
  local r, err = c:chat { messages = { { role = "user", content = q } }, stream = true,
    on_delta = function(d, kind) if kind == "text" then out[#out + 1] = d end end }
  t.ok(r, err and err.message)
  t.eq(r.attempts, 2)
  -- first attempt sent "Hel", the second "echo: Hello there pN": shown once, announced as restarted
  t.eq(table.concat(out), "Hel\n[the answer restarted after an error]\necho: " .. q)
  -- an attempt that repeats what was shown prints nothing twice
  local shown = {}
  llm.register_provider("restart_test", { call = function(_, req, ctx)
    req.on_delta("Hel", "text", ctx.attempt)
    if ctx.attempt == 1 then return nil, { kind = "network", retryable = true, message = "cut" } end
    req.on_delta("lo", "text", ctx.attempt)
    return { text = "Hello", usage = {} }
  end })
  local c2 = llm.client { provider = "restart_test", model = "m", backoff_base = 0.001 }
  assert(c2:chat { messages = { { role = "user", content = "x" } }, stream = true,
    on_delta = function(d) shown[#shown + 1] = d end })
  t.eq(table.concat(shown), "Hello")
end)

t.test("a stalled endpoint is given up after give_up_after in all, not after every retry", function()
  local c = client("openai", "fault-slow", { timeout = 0.3, give_up_after = 0.5, max_retries = 50 })
  local t0 = task.now()
  local r, err = c:chat { messages = { { role = "user", content = prompt() } } }
  t.eq(r, nil)
  t.eq(err.kind, "timeout")
  t.contains(err.message, "give_up_after")
  t.ok(err.attempts <= 3, "attempts " .. tostring(err.attempts))
  t.ok(task.now() - t0 < 3, "gave up in " .. (task.now() - t0) .. " s")
end)

t.test("the default client gives a stall up within about 5 minutes and caps replies", function()
  local c = llm.client { provider = "openai", model = "m", base_url = srv.url }
  t.ok(c.timeout <= 300 and c.give_up_after <= 300 and c.stall_timeout <= 60)
  t.eq(c.max_response_bytes, 32 << 20)
  local big = client("openai", "fault-huge", { max_response_bytes = 1 << 20 })
  for _, stream in ipairs { false, true } do
    local r, err = big:chat { messages = { { role = "user", content = prompt() } }, stream = stream }
    t.eq(r, nil)
    t.eq(err.kind, "bad_response")
    t.contains(err.message, "max_response_bytes")
    t.eq(err.attempts, 1) -- not retried: the same endpoint would send the same again
  end
end)

t.test("mkengine ask --timeout gives up a slow endpoint in that time", function()
  local f = tmp .. "/ask_timeout.lua"
  fs.write(f, string.format("return { providers = { openai = { base_url = %q, api_key_env = %q } } }\n",
    srv.url .. "/v1", fake.key_env))
  local exe = os.getenv("MKENGINE_BUILD") .. "/mkengine"
  local t0 = task.now()
  local p = io.popen(string.format("%q ask --model openai:fault-slow --llm-config %q --timeout 1 'slow one' 2>&1; echo rc=$?",
    exe, f))
  local out = p:read("a")
  p:close()
  t.contains(out, "timeout: ")
  t.contains(out, "rc=1")
  t.ok(task.now() - t0 < 6, "took " .. (task.now() - t0) .. " s")
  p = io.popen(string.format("%q ask --model openai:ok --timeout 0 x 2>&1; echo rc=$?", exe))
  out = p:read("a")
  p:close()
  t.contains(out, "rc=2")
end)

t.test("argument mistakes raise", function()
  local c = client("openai", "ok")
  t.raises(function() c:chat("hi") end, "expected a request table")
  t.raises(function() c:chat { messages = {} } end, "non-empty list")
  t.raises(function() c:chat { messages = { { role = "user" } } } end, "string content")
  t.raises(function() llm.client { provider = "openai" } end, "'model' is required")
  t.raises(function() llm.client { provider = "openai", model = "x", cache = "yes" } end, "cache must be")
  t.raises(function() llm.register_provider("x", {}) end, "call function")
end)

local code = t.run()
srv.stop()
fs.rm_rf(tmp)
return code
