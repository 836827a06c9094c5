-- The run viewer's server side (mk.httpd, mk.ui.server, mk.search.ask) over
-- real HTTP on the loopback: live nodes pushed as Server-Sent Events,
-- node details with code and diff, answers (first one wins, the token is
-- required), stop, refused paths, and bad requests answered with 4xx while
-- the server goes on. The page itself is tested in Chromium (tests/browser).
local t = dofile("tests/lua/lib/t.lua")
local http = require "mk.http"
local httpd = require "mk.httpd"
local task = require "mk.services.task"
local fs = require "mk.fs"
local json = require "cjson"
local rundir = require "mk.search.rundir"
local ask = require "mk.search.ask"
local server = require "mk.ui.server"

local tmp = t.tmpdir("mk-ui-test")

local function get(s, path, o)
  o = o or {}
  local r, err = http.request { url = "http://127.0.0.1:" .. s.port .. path, method = o.method, body = o.body,
    headers = o.headers, timeout = 20 }
  assert(r, err and err.message)
  return r.status, r.body
end

local function post(s, path, body, token)
  return get(s, path, { method = "POST", body = json.encode(body), headers = { ["X-MK-Token"] = token } })
end

-- A run directory with a reference node and one child.
local function make_run(name)
  local run = assert(rundir.create { dir = tmp .. "/runs/" .. name, strategy = "hitl", task = "demo" })
  run.spent = function() return { tokens = 10, usd = 0, device_s = 1 } end
  local root = assert(run.graph:add { parents = {}, kind = "reference", key = "root", files = { ["k.c"] = "int a;\n" },
    metrics = { latency_s = 0.002, speedup = 1 } })
  assert(run.graph:add { parents = { root }, kind = "implement", key = "root/i1", plan = "make it faster",
    files = { ["k.c"] = "int a;\nint b;\n" }, metrics = { latency_s = 0.001, speedup = 2, timing = { bench_s = 0.5 } },
    meta = { profile = "memory-bound: 51% of the roofline" } })
  return run
end

t.test("httpd answers requests from tasks and streams without blocking the loop", function()
  local srv = assert(httpd.listen { port = 0 })
  local port = srv:port()
  t.ok(port > 0)
  task.spawn(function()
    local req = srv:next()
    t.eq(req.method, "POST")
    t.eq(req.query.a, "1")
    req:respond(201, "got " .. #req.body, { ["X-Test"] = "yes" })
  end)
  local r = assert(http.request { url = "http://127.0.0.1:" .. port .. "/p?a=1", method = "POST", body = "hello" })
  t.eq(r.status, 201)
  t.eq(r.body, "got 5")
  srv:close()
  t.eq(srv:next(), nil)
end)

t.test("httpd holds a send given a delay until then, or until a send without one; in order", function()
  local srv = assert(httpd.listen { port = 0 })
  local stream
  task.spawn(function()
    stream = srv:next()
    stream:stream(200, { ["Content-Type"] = "text/plain" })
  end)
  local req = http.open { url = "http://127.0.0.1:" .. srv:port() .. "/", timeout = 30, lines = true }
  while not stream do task.sleep(0.01) end
  local got, ended = {}, false
  local reader = task.spawn(function()
    while true do
      local lines = req:next_lines()
      if not lines then break end
      for _, l in ipairs(lines) do got[#got + 1] = l end
    end
    ended = true
  end)
  local function read_until(n)
    while #got < n and not ended do task.sleep(0.01) end
    t.ok(#got >= n, "the stream ended after " .. table.concat(got, ","))
  end
  t.eq(stream:send("a\n", 60), true) -- held: would wait a minute
  t.eq(stream:send("b\n", 60), true)
  task.sleep(0.3)
  t.eq(#got, 0, "nothing arrives while held")
  t.eq(stream:send("c\n"), true) -- goes at once, with what was held before it
  read_until(3)
  t.eq(table.concat(got, ","), "a,b,c")
  stream:send("d\n", 0.05) -- a short hold ends by itself
  read_until(4)
  t.eq(got[4], "d")
  stream:send("e\n", 60)
  stream:close() -- the end of a stream takes what was held
  read_until(5)
  t.eq(got[5], "e")
  task.await(reader)
  t.ok(ended)
  t.raises(function() stream:send("x", -1) end, "within_s")
  req:close()
  srv:close()
end)

t.test("a run page's stream pushes the nodes a running engine commits", function()
  local run = make_run("live")
  local s = assert(server.start { root = tmp .. "/runs" })
  local req = http.open { url = "http://127.0.0.1:" .. s.port .. "/api/live/live", timeout = 30, lines = true }
  local seen, text = {}, ""
  local function until_has(pat)
    while not text:find(pat) do
      local lines = req:next_lines()
      if not lines then error("stream ended before " .. pat) end
      for _, l in ipairs(lines) do text = text .. l .. "\n"; seen[#seen + 1] = l end
    end
  end
  until_has("event: state")
  until_has('"n0002"')
  assert(run.graph:add { parents = { "n0002" }, kind = "fix", key = "root/i1/fix1", files = { ["k.c"] = "int c;\n" },
    status = "incorrect" })
  until_has("event: nodes\ndata: [^\n]*n0003")
  req:close()
  s:close()
  run:close()
end)

-- A page's stream: the messages {event =, data =} read so far, and
-- :wait(pred, what) to read on until pred(self) holds.
local function stream(s, id)
  local req = http.open { url = "http://127.0.0.1:" .. s.port .. "/api/live/" .. id, timeout = 30, lines = true }
  local st = { msgs = {}, cur = {} }
  function st:wait(pred, what)
    while not pred(self) do
      local lines = req:next_lines()
      if not lines then error("stream ended before " .. what) end
      for _, l in ipairs(lines) do
        local k, v = l:match("^(%w+): ?(.*)$")
        if l == "" and self.cur.event then
          self.msgs[#self.msgs + 1] = { event = self.cur.event, data = json.decode(self.cur.data) }
          self.cur = {}
        elseif k == "event" or k == "data" then
          self.cur[k] = v
        end
      end
    end
  end
  function st.close() req:close() end
  -- node ids in the order the page got them (its state, then each push)
  function st:ids()
    local out = {}
    for _, m in ipairs(self.msgs) do
      for _, n in ipairs(m.event == "state" and m.data.nodes or m.event == "nodes" and m.data or {}) do
        out[#out + 1] = n.id
      end
    end
    return table.concat(out, " ")
  end
  -- the log lines pushed to the page
  function st:logs()
    local out = {}
    for _, m in ipairs(self.msgs) do
      for _, e in ipairs(m.event == "events" and m.data.events or {}) do
        if e.type == "log" then out[#out + 1] = e.message end
      end
    end
    return table.concat(out, " ")
  end
  function st:last(event)
    for i = #self.msgs, 1, -1 do
      if self.msgs[i].event == event then return self.msgs[i].data end
    end
  end
  return st
end

local function has(event) return function(st) return st:last(event) ~= nil end end

-- A server on run (fed by it when o.run is set) and a page open on it.
local function open_page(run, o)
  o.root = run.dir
  local s = assert(server.start(o))
  local page = stream(s, "")
  page:wait(has("state"), "the state")
  return s, page
end

local function close_all(...)
  for _, x in ipairs { ... } do x:close() end
end

-- Reads of the files a viewer follows a run by (its node index, its event
-- log, the list of its questions), recorded while fn runs.
local function reads_during(dir, fn)
  local seen, saved = {}, { stat = fs.stat, read = fs.read, list = fs.list, open = io.open }
  local function note(p)
    if type(p) == "string" and p:find(dir, 1, true) == 1
        and (p:find("nodes.jsonl", 1, true) or p:find("events.jsonl", 1, true) or p:match("/questions/?$")) then
      seen[#seen + 1] = p
    end
  end
  for _, k in ipairs { "stat", "read", "list" } do fs[k] = function(p, ...) note(p); return saved[k](p, ...) end end
  io.open = function(p, ...) note(p); return saved.open(p, ...) end -- luacheck: ignore 122
  local ok, err = pcall(fn)
  for _, k in ipairs { "stat", "read", "list" } do fs[k] = saved[k] end
  io.open = saved.open -- luacheck: ignore 122
  if not ok then error(err, 0) end
  return seen
end

-- A question asked the way ctx:ask asks it (its events through the run),
-- answered from the page over HTTP; returns the decision the strategy got.
local function ask_and_answer(s, run, page)
  local got
  local asker = task.spawn(function()
    got = ask.ask(run.dir, { key = "root/i3/code", kind = "review", title = "code", text = "int d;\n" },
      function(e, q) run:event(e, q) end, run.info)
  end)
  page:wait(function(st) return #(st:last("questions") or {}) == 1 end, "the question")
  local q = page:last("questions")[1]
  t.eq(q.text, "int d;\n")
  t.eq(post(s, "/api/run//answer", { id = q.id, verb = "edit", text = "int e;\n" }, s.token), 200)
  task.await(asker)
  page:wait(function(st) return st:last("questions") and #st:last("questions") == 0 end, "no question left")
  return got
end

-- The same run followed two ways: `serve` (its files) and `run --ui` (the engine).
for _, mode in ipairs { "files", "engine" } do
  t.test("a page opened beside another misses nothing and gets nothing twice, followed from the " .. mode, function()
    local run = make_run("twice-" .. mode)
    local s = assert(server.start { root = run.dir, run = mode == "engine" and run or nil })
    local a = stream(s, "")
    a:wait(has("state"), "a's state")
    assert(run.graph:add { parents = { "n0002" }, kind = "fix", key = "root/i1/fix1", files = { ["k.c"] = "int c;\n" } })
    run:event { type = "log", message = "one" }
    local b = stream(s, "")
    b:wait(has("state"), "b's state")
    assert(run.graph:add { parents = { "n0003" }, kind = "tune", key = "root/i1/fix1/t1", files = { ["k.c"] = "int d;\n" },
      metrics = { latency_s = 0.0005, speedup = 4 } })
    run:event { type = "log", message = "two" }
    for _, st in ipairs { a, b } do
      st:wait(function(x) return x:logs():find("two") and x:ids():find("n0004") end, "n0004 and the second log line")
      t.eq(st:ids(), "n0001 n0002 n0003 n0004")
      t.eq(st:last("events").best, "n0004")
    end
    t.eq(a:logs(), "one two")
    t.eq(b:logs(), "two")
    close_all(a, b, s, run)
  end)
end

t.test("run --ui's viewer takes nodes, events and questions from the engine and reads no run file back", function()
  local run = make_run("fed")
  local s, page = open_page(run, { run = run })
  local got
  local seen = reads_during(run.dir, function()
    for i = 1, 20 do
      assert(run.graph:add { parents = { "n0002" }, kind = "tune", key = "root/t" .. i, files = { ["k.c"] = "int t" .. i .. ";\n" },
        metrics = { latency_s = 0.001 / (i + 1), speedup = i + 1 } })
      run:event { type = "log", message = "tuned " .. i }
      run:event { type = "llm", tokens = 5 } -- not shown on the page
      if i % 7 == 0 then task.sleep(0.15) end -- some pushes apart, some together
    end
    page:wait(function(st) return st:logs():find("tuned 20") end, "the last log line")
    got = ask_and_answer(s, run, page)
    run:set_status("done")
    page:wait(function(st) return (st:last("info") or {}).status == "done" end, "the run's end")
  end)
  t.same(seen, {}, "no file of the run was read after the page opened")
  local want = { "n0001", "n0002" }
  for i = 1, 20 do want[#want + 1] = string.format("n%04d", i + 2) end
  t.eq(page:ids(), table.concat(want, " "))
  local logs = {}
  for i = 1, 20 do logs[i] = "tuned " .. i end
  t.eq(page:logs(), table.concat(logs, " "))
  t.eq(got.verb, "edit")
  t.eq(got.text, "int e;\n")
  local code, body = get(s, "/api/node//n0022")
  t.eq(code, 200, body)
  t.eq(json.decode(body).files[1].text, "int t20;\n")
  t.eq(json.decode(body).diff.parent, "n0002")
  close_all(page, s, run)
end)

t.test("serve of a run another engine writes reads its files", function()
  local run = make_run("read")
  local s, page = open_page(run, {}) -- no run handed over: another process's
  local got
  local seen = reads_during(run.dir, function()
    assert(run.graph:add { parents = { "n0002" }, kind = "fix", key = "root/i1/fix1", files = { ["k.c"] = "int c;\n" } })
    page:wait(function(st) return st:ids():find("n0003") end, "n0003")
    got = ask_and_answer(s, run, page)
  end)
  t.ok(#seen > 0, "the index and event log were read")
  t.eq(got.text, "int e;\n")
  close_all(page, s, run)
end)

t.test("serve RUN opens that run's page; serve DIR of runs opens the index", function()
  local one = make_run("single")
  make_run("other"):close()
  local s = assert(server.start { root = one.dir })
  t.matches(s.url, "/run/$")
  local _, body = get(s, "/api/runs")
  t.eq(json.decode(body).single, "", "the index sends the browser on to the run")
  s:close()
  one:close()
  local d = assert(server.start { root = tmp .. "/runs" })
  t.matches(d.url, ":%d+/$")
  _, body = get(d, "/api/runs")
  local list = json.decode(body)
  t.eq(list.single, nil)
  t.ok(#list.runs >= 2)
  d:close()
end)

t.test("a page is one request: its style sheet and script come inline, no icon is asked for", function()
  local run = make_run("inline")
  local s = assert(server.start { root = run.dir })
  for _, path in ipairs { "/run/", "/" } do
    local code, html = get(s, path)
    t.eq(code, 200)
    t.contains(html, "window.mkui", "the script inline")
    t.contains(html, "<style>", "the style sheet inline")
    t.ok(not html:find("/assets/", 1, true), "nothing left to fetch")
    t.contains(html, '<link rel="icon" href="data:,">')
  end
  t.eq(get(s, "/assets/ui.js"), 200, "the assets are still served")
  close_all(s, run)
end)

t.test("node details carry code, diff against the parent, plan and profile", function()
  local run = make_run("details")
  local s = assert(server.start { root = tmp .. "/runs" })
  local code, body = get(s, "/api/node/details/n0002")
  t.eq(code, 200, body)
  local d = json.decode(body)
  t.eq(d.plan, "make it faster")
  t.eq(d.files[1].text, "int a;\nint b;\n")
  t.contains(d.diff.patch, "+int b;")
  t.eq(d.diff.parent, "n0001")
  t.contains(d.profile, "roofline")
  t.eq(get(s, "/api/node/details/n9999"), 404)
  s:close()
  run:close()
end)

t.test("the viewer shows one figure per kernel: older nodes name the holder, a re-measurement reaches them", function()
  local runs = require "mk.ui.runs"
  local run = make_run("figure")
  local same = { ["k.c"] = "int same;\n" }
  assert(run.graph:add { parents = { "n0001" }, kind = "implement", key = "a", files = same,
    metrics = { latency_s = 0.0008, speedup = 2.5, source_hash = "h" } })
  assert(run.graph:add { parents = { "n0001" }, kind = "implement", key = "b", files = same,
    metrics = { latency_s = 0.0009, speedup = 2 / 0.9, source_hash = "h", measurements = 2,
      samples = { 0.0008, 0.001 } } })
  local w = runs.watch(run.dir)
  w:poll()
  local st = w:state()
  local by = {}
  for _, n in ipairs(st.nodes) do by[n.id] = n end
  t.eq(by.n0003.same_as, "n0004")
  t.eq(by.n0003.latency_s, 0.0009, "the older node shows the kernel's figure, not its first one")
  t.eq(st.best, "n0004", "the holder stands for the kernel; the first figure (0.8 ms) no longer ranks")
  run:event { type = "measure", source_hash = "h", latency_s = 0.0007, speedup = 2 / 0.7, measurements = 3,
    samples = { 0.0008, 0.001, 0.0007 } }
  local changed = w:poll()
  local ids = {}
  for _, n in ipairs(changed) do ids[#ids + 1] = n.id end
  table.sort(ids)
  t.same(ids, { "n0003", "n0004" }, "both nodes of the kernel are sent again")
  t.eq(runs.public_node(w.by_id.n0003, w.pool).latency_s, 0.0007)
  t.eq(w.best, "n0004")
  -- the same from the engine's own feed (run --ui): the measure event is handed over, not read
  local feed = runs.feed(run)
  t.eq(runs.public_node(feed.by_id.n0003, feed.pool).latency_s, 0.0007, "the past as read once")
  run:event { type = "measure", source_hash = "h", latency_s = 0.0006, speedup = 2 / 0.6, measurements = 4,
    samples = { 0.0008, 0.001, 0.0007, 0.0006 } }
  local again = feed:poll()
  t.eq(#again, 2, "both nodes of the kernel")
  t.eq(runs.public_node(again[1], feed.pool).latency_s, 0.0006)
  feed:close()
  run:close()
end)

t.test("answers need the token, the first one wins, bad ones are 4xx", function()
  local run = make_run("ask")
  local s = assert(server.start { root = tmp .. "/runs" })
  local got
  local asker = task.spawn(function()
    got = ask.ask(run.dir, { key = "root/i2/plan", kind = "review", title = "plan", text = "the plan" })
  end)
  local id = ask.id("root/i2/plan")
  while not ask.question(run.dir, id) do task.sleep(0.01) end
  t.eq(post(s, "/api/run/ask/answer", { id = id, verb = "accept" }, "wrong"), 403)
  t.eq(post(s, "/api/run/ask/answer", { id = id, verb = "frobnicate" }, s.token), 400)
  t.eq(post(s, "/api/run/ask/answer", { id = "nope", verb = "accept" }, s.token), 404)
  local c1 = post(s, "/api/run/ask/answer", { id = id, verb = "edit", text = "a better plan" }, s.token)
  local c2, b2 = post(s, "/api/run/ask/answer", { id = id, verb = "reject" }, s.token)
  t.eq(c1, 200)
  t.eq(c2, 409)
  t.eq(json.decode(b2).decision.verb, "edit")
  task.await(asker)
  t.eq(got.verb, "edit")
  t.eq(got.text, "a better plan")
  -- replayed, not asked again (what resume relies on)
  t.eq(ask.ask(run.dir, { key = "root/i2/plan", kind = "review", text = "x" }).text, "a better plan")
  s:close()
  run:close()
end)

t.test("stop needs the token and names the session it stops", function()
  local run = make_run("stop")
  local s = assert(server.start { root = tmp .. "/runs" })
  t.eq(post(s, "/api/run/stop/stop", {}, nil), 403)
  t.ok(not fs.exists(run.dir .. "/stop.json"))
  t.eq(post(s, "/api/run/stop/stop", {}, s.token), 200)
  t.ok(ask.stop_requested(run.dir, { resumed = 0 }))
  t.eq(ask.stop_requested(run.dir, { resumed = 1 }), nil) -- a later resume is not stopped by it
  s:close()
  run:close()
end)

t.test("paths outside the served directory and bad requests are refused, the server goes on", function()
  make_run("safe"):close()
  fs.write(tmp .. "/secret.txt", "OPENAI_API_KEY=sk-xyz")
  os.execute("ln -s " .. tmp .. " " .. tmp .. "/runs/link")
  local s = assert(server.start { root = tmp .. "/runs" })
  t.eq(get(s, "/api/node/link/safe/n0001"), 404)
  t.eq(get(s, "/api/live/..%2f..%2fetc"), 400)
  t.eq(get(s, "/assets/..%2F..%2Fsearch%2Fask.lua"), 400)
  t.eq(get(s, "/api/node/safe/n0001", { method = "DELETE" }), 405)
  t.eq(get(s, "/nowhere"), 404)
  t.eq(get(s, "/api/runs", { headers = { Host = "evil.example:" .. s.port } }), 421)
  local code, body = post(s, "/api/run/safe/answer", "not an object", s.token)
  t.eq(code, 400, body)
  local c2, list = get(s, "/api/runs")
  t.eq(c2, 200)
  t.ok(not list:find("link/", 1, true), "symlinked directories are not listed")
  s:close()
end)

t.test("the terminal answers through the loop: other tasks run while stdin is read", function()
  local proc = require "mk.proc"
  local MK = fs.realpath((os.getenv("MKENGINE_BUILD") or "build") .. "/mkengine")
  local run = make_run("terminal")
  run:close()
  local script = tmp .. "/terminal.lua"
  fs.write(script, [[
local task = require "mk.services.task"
local ask = require "mk.search.ask"
local ticks = 0
local ticker = task.spawn(function() while true do task.sleep(0.01); ticks = ticks + 1 end end)
local d = ask.ask(arg[1], { key = "root/t", kind = "review", text = "code", terminal = true, out = io.stdout })
print("\nDECISION " .. d.verb .. " " .. d.by .. " " .. tostring(ticks > 0))
ticker:cancel()
]])
  local r = assert(proc.run { argv = { MK, "script", script, run.dir }, stdin = "what?\nr\n", timeout = 60 })
  t.eq(r.code, 0, r.stderr)
  t.contains(r.stdout, "[a]ccept")
  t.contains(r.stdout, "DECISION reject terminal true")
  t.eq(ask.decision(run.dir, ask.id("root/t")).verb, "reject")
end)

return t.run()
