-- mk.http against the loopback fake LLM server (tests/fake_llm/server.py).
local t = dofile("tests/lua/lib/t.lua")
local fake = dofile("tests/fake_llm/fake.lua")
local http = require "mk.http"
local task = require "mk.services.task"
local cjson = require "cjson"

local srv = fake.start()

local function chat_body(model, stream, text)
  return cjson.encode { model = model, stream = stream, messages = { { role = "user", content = text or "a b c" } } }
end

local function post(model, stream, extra)
  local o = {
    method = "POST", url = srv.url .. "/v1/chat/completions",
    headers = { authorization = "Bearer " .. fake.key, ["content-type"] = "application/json" },
    body = chat_body(model, stream, extra and extra.text),
  }
  for k, v in pairs(extra or {}) do if k ~= "text" then o[k] = v end end
  return o
end

local function settled()
  local live, running = http.live()
  return live == 0 and running == 0
end

t.test("request returns status, lower-case headers and the body", function()
  local r, err = http.request { url = srv.url .. "/_stats" }
  t.ok(r, err and err.message)
  t.eq(r.status, 200)
  t.eq(r.headers["content-type"], "application/json")
  t.eq(cjson.decode(r.body).by_model ~= nil, true)
  t.eq(type(r.time_s), "number")
end)

t.test("POST sends the body and headers; a non-2xx status is a response, not an error", function()
  local r = assert(http.request(post("ok", false, { text = "hello there" })))
  t.eq(r.status, 200)
  t.eq(cjson.decode(r.body).choices[1].message.content, "echo: hello there")
  local o = post("ok", false)
  o.headers.authorization = "Bearer wrong"
  local r2, err = http.request(o)
  t.eq(err, nil)
  t.eq(r2.status, 401)
  t.contains(r2.body, "invalid_api_key")
end)

t.test("on_line gets the streamed body line by line and may wait inside the callback", function()
  local lines = {}
  local r = assert(http.request(post("ok", true, {
    text = "one two three",
    on_line = function(line)
      task.sleep(0.001) -- an engine wait inside the callback
      lines[#lines + 1] = line
    end,
  })))
  t.eq(r.status, 200)
  local data = {}
  for _, l in ipairs(lines) do
    t.eq(l:find("\n", 1, true), nil, "lines carry no newline")
    if l:sub(1, 6) == "data: " then data[#data + 1] = l:sub(7) end
  end
  t.eq(data[#data], "[DONE]")
  t.eq(#data, 8) -- role, 4 words, finish, usage, [DONE]
  t.eq(table.concat(lines, "\n") .. "\n", r.body, "the body is still returned whole")
  t.ok(settled(), "no transfer left behind")
end)

t.test("an error raised by on_line propagates and aborts the transfer", function()
  local err = t.raises(function()
    http.request(post("delay-300", true, { on_line = function() error("stop here") end }))
  end, "stop here")
  t.ok(err)
  t.ok(settled(), "the transfer was closed")
end)

t.test("cancelling the task aborts the transfer in flight", function()
  local started = false
  local h = task.spawn(function()
    started = true
    return http.request(post("delay-5000", false))
  end)
  task.sleep(0.2)
  t.ok(started)
  local _, running = http.live()
  t.eq(running, 1, "the transfer is in flight")
  h:cancel()
  local ok, err = task.try_await(h)
  t.eq(ok, false)
  t.eq(err.kind, "cancelled")
  t.ok(settled(), "the transfer was removed and freed")
end)

t.test("cancelling a task streaming with on_line aborts it too", function()
  local got = 0
  local h = task.spawn(function()
    return http.request(post("delay-5000", true, { on_line = function() got = got + 1 end }))
  end)
  task.sleep(0.1)
  h:cancel()
  t.eq((task.try_await(h)), false)
  t.eq(got, 0)
  t.ok(settled())
end)

t.test("timeout ends a slow answer with kind timeout", function()
  local r, err = http.request(post("fault-slow", false, { timeout = 0.3 }))
  t.eq(r, nil)
  t.eq(err.kind, "timeout")
  t.eq(err.curl_code, 28)
  t.ok(settled())
end)

t.test("stall_timeout ends a transfer that sends nothing", function()
  local r, err = http.request(post("fault-slow", false, { stall_timeout = 0.5 }))
  t.eq(r, nil)
  t.eq(err.kind, "timeout")
  t.contains(err.message, "stall_timeout")
  t.ok(settled())
  -- a stream that keeps sending is not a stall, however long it lasts
  local r2 = assert(http.request(post("ok", true, { stall_timeout = 0.5, on_line = function() task.sleep(0.05) end })))
  t.eq(r2.status, 200)
end)

t.test("the stall timer counts from the request, not from a loop clock left stale by blocking work", function()
  -- os.execute blocks the engine without a turn of the loop: its cached
  -- clock is now 3.3 s behind. A stall timer stamped from that clock would
  -- be past due at once and fail a healthy stream before a byte arrives.
  assert(os.execute("sleep 3.3"))
  local r, err = http.request(post("ok", true, { stall_timeout = 3 }))
  t.ok(r, err and err.message)
  t.eq(r.status, 200)
  t.ok(settled())
end)

t.test("a refused connection is kind network", function()
  local r, err = http.request { url = "http://127.0.0.1:1/" }
  t.eq(r, nil)
  t.eq(err.kind, "network")
  t.ok(#err.message > 0)
end)

t.test("a body cut mid-way is kind network", function()
  local r, err = http.request(post("fault-cutalways", false))
  t.eq(r, nil)
  t.eq(err.kind, "network")
  t.eq(err.curl_code, 18) -- CURLE_PARTIAL_FILE
end)

t.test("a scheme other than http(s) is refused as bad_request", function()
  local r, err = http.request { url = "file:///etc/passwd" }
  t.eq(r, nil)
  t.eq(err.kind, "bad_request")
end)

t.test("argument mistakes raise", function()
  t.raises(function() http.request("http://x") end, "expected a table")
  t.raises(function() http.request {} end, "'url' is required")
  t.raises(function() http.request { url = "http://x", timeout = "soon" } end, "'timeout' must be a number")
  t.raises(function() http.request { url = "http://x", headers = { a = {} } } end, "headers must map")
  t.raises(function() http.request { url = "http://x", on_line = 3 } end, "on_line must be a function")
end)

t.test("calling where the task cannot wait raises a clear error", function()
  local ok, err = pcall(table.sort, { 1, 2, 3 }, function(a, b)
    http.request { url = srv.url .. "/_stats" }
    return a < b
  end)
  t.eq(ok, false)
  t.contains(tostring(err), "inside a task")
end)

t.test("works inside pcall and inside a user coroutine", function()
  local ok, r = pcall(http.request, { url = srv.url .. "/_stats" })
  t.ok(ok)
  t.eq(r.status, 200)
  local co = coroutine.wrap(function(u)
    coroutine.yield("first")
    return http.request({ url = u }).status
  end)
  t.eq(co(srv.url .. "/_stats"), "first")
  t.eq(co(), 200)
end)

t.test("sequential requests to one host reuse the kept-alive connection", function()
  assert(http.request { url = srv.url .. "/_stats" })
  local r = assert(http.request { url = srv.url .. "/_stats" })
  t.eq(r.new_connections, 0)
  local r2 = assert(http.request(post("ok", true, { on_line = function() end })))
  t.eq(r2.new_connections, 0)
end)

t.test("an idle kept-alive connection does not keep a finished engine waiting", function()
  local fs = require "mk.fs"
  local dir = t.tmpdir("mk-http-idle-")
  fs.write(dir .. "/idle.lua", string.format([[
local http = require "mk.http"
assert(http.request { url = %q }.status == 200)
require("mk.services.task").queue():get() -- nothing will ever put: the engine must say so, not hang
]], srv.url .. "/_stats"))
  local exe = (os.getenv("MKENGINE_BUILD") or "build") .. "/mkengine"
  local p = io.popen(string.format("timeout 20 %q script %q 2>&1; echo rc=$?", exe, dir .. "/idle.lua"))
  local out = p:read("a")
  p:close()
  fs.rm_rf(dir)
  t.contains(out, "deadlock")
  t.contains(out, "rc=1")
end)

t.test("many concurrent requests all complete", function()
  local hs = {}
  for i = 1, 64 do
    hs[i] = task.spawn(function()
      local r = assert(http.request(post("delay-100", i % 2 == 0, { text = "n" .. i, on_line = i % 2 == 0 and function() end or nil })))
      return r.status
    end)
  end
  local st = task.gather(hs)
  for i = 1, 64 do t.eq(st[i], 200) end
  t.ok(settled())
end)

t.test("open/next_lines/wait give the same stream without a callback", function()
  local req = http.open(post("ok", true, { lines = true }))
  local n = 0
  while true do
    local lines = req:next_lines()
    if not lines then break end
    n = n + #lines
  end
  local r = assert(req:wait())
  t.eq(req:status(), 200)
  req:close()
  t.eq(r.status, 200)
  t.ok(n >= 16)
  t.raises(function() req:wait() end, "closed")
  t.ok(settled())
end)

-- peak resident memory of this process (kB), from the kernel
local function hwm_kb()
  return tonumber((require("mk.fs").read("/proc/self/status") or ""):match("VmHWM:%s*(%d+)"))
end

t.test("a 1 GiB reply without Content-Length stops at max_response_bytes as bad_response, memory returned", function()
  local before = hwm_kb()
  local r, err = http.request(post("fault-huge", false, { max_response_bytes = 8 << 20 }))
  t.eq(r, nil)
  t.eq(err.kind, "bad_response")
  t.contains(err.message, "max_response_bytes")
  t.ok(settled())
  -- never held much more than the cap (the body alone would be 1 GiB)
  t.ok(hwm_kb() - before < 128 * 1024, "peak RSS grew by " .. (hwm_kb() - before) .. " kB")
end)

t.test("a streamed 1 GiB reply stops at max_response_bytes too, lines included", function()
  local before = hwm_kb()
  local n = 0
  local r, err = http.request(post("fault-huge", true, { max_response_bytes = 8 << 20,
    on_line = function() n = n + 1 end }))
  t.eq(r, nil)
  t.eq(err.kind, "bad_response")
  -- at most the lines of the first 8 MiB (pieces of ~65 KB, each a data
  -- line and a blank line: <= 260; none when the cap came before the task
  -- took any), however promptly the task took them;
  -- not the ~33k lines of the whole body
  t.ok(n <= 2 * ((8 << 20) // 65000 + 1), "lines seen: " .. n)
  t.ok(settled())
  t.ok(hwm_kb() - before < 128 * 1024, "peak RSS grew by " .. (hwm_kb() - before) .. " kB")
end)

t.test("max_response_bytes lets a reply under the cap through", function()
  local r = assert(http.request(post("ok", false, { max_response_bytes = 4096, text = "small" })))
  t.eq(r.status, 200)
  t.contains(r.body, "echo: small")
end)

local code = t.run()
srv.stop()
return code
