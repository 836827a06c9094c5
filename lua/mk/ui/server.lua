--- mk.ui.server: the run viewer's HTTP side (`mkengine serve`, `run --ui`).
---
--- Serves the pages (assets from lua/mk/ui/assets, no CDN), a JSON API over
--- the run directories under one root, and a Server-Sent Events stream per
--- open run page: what the run committed is pushed within 100 ms, handed
--- over by the engine when it is the run this engine writes (`run --ui`),
--- else read from what was appended to its node index and event log
--- (mk.ui.runs). Writes
--- (answers to questions, stop) need the token printed at start, sent as the
--- X-MK-Token header (a header, not a cookie: another site cannot make a
--- browser send it). Requests are answered by tasks of the engine's loop;
--- an error in a handler is a 500 with its message, never a crash of the
--- run being served.
local httpd = require "mk.httpd"
local fs = require "mk.fs"
local home = require "mk.home"
local json = require "cjson.safe"
local task = require "mk.services.task"
local ask = require "mk.search.ask"
local runs = require "mk.ui.runs"

local M = {}

M.TICK_S = 0.1        -- how often a watched run's files are checked for new lines
M.HEARTBEAT_S = 15    -- an idle stream still sends a comment this often

local Server = {}
Server.__index = Server

local ASSET_TYPES = { html = "text/html; charset=utf-8", js = "text/javascript; charset=utf-8",
  css = "text/css; charset=utf-8", png = "image/png" }
local NO_STORE = { ["Cache-Control"] = "no-store", ["X-Content-Type-Options"] = "nosniff" }

local function headers(ctype)
  local h = { ["Content-Type"] = ctype }
  for k, v in pairs(NO_STORE) do h[k] = v end
  return h
end

local function new_token()
  local f = assert(io.open("/dev/urandom", "rb"))
  local b = f:read(16)
  f:close()
  return (b:gsub(".", function(c) return string.format("%02x", c:byte()) end))
end

local function send_json(req, status, v)
  return req:respond(status, json.encode(v) .. "\n", headers("application/json; charset=utf-8"))
end

local function fail(req, status, msg) return send_json(req, status, { error = msg }) end

-- ---- pages and assets ---------------------------------------------------------

local function read_asset(name) return fs.read(home.path("lua/mk/ui/assets/" .. name)) end

function Server:asset(req, name) -- luacheck: ignore 212/self
  local ext = name:match("^[%w_-]+%.(%a+)$")
  if not ext or not ASSET_TYPES[ext] then return fail(req, 404, "no such asset") end
  local data = read_asset(name)
  if not data then return fail(req, 404, "no such asset") end
  return req:respond(200, data, headers(ASSET_TYPES[ext]))
end

-- The tags of a page that link the style sheet and the script, and what
-- puts each inline.
local INLINE = {
  { tag = '<link rel="stylesheet" href="/assets/ui.css">', name = "ui.css", open = "<style>", close = "</style>" },
  { tag = '<script src="/assets/ui.js"></script>', name = "ui.js", open = "<script>", close = "</script>" },
}

-- An HTML page with its style sheet and script inline: one request where
-- there were three, each of which costs the engine a task and the HTTP
-- library's work. The assets stay files, read at each request.
function Server:page(req, name) -- luacheck: ignore 212/self
  local html = read_asset(name)
  if not html then return fail(req, 404, "no such page") end
  local parts, pos = {}, 1
  for _, x in ipairs(INLINE) do
    local a, b = html:find(x.tag, pos, true)
    local body = a and read_asset(x.name)
    if body and not body:lower():find(x.close, 1, true) then
      parts[#parts + 1] = html:sub(pos, a - 1)
      parts[#parts + 1] = x.open .. body .. x.close
      pos = b + 1
    end
  end
  parts[#parts + 1] = html:sub(pos)
  return req:respond(200, table.concat(parts), headers(ASSET_TYPES.html))
end

-- A bench or sweep: the HTML report mk.study.report draws for it.
function Server:report_page(req, id)
  local dir, why = runs.resolve(self.root, id)
  if not dir then return fail(req, 404, why) end
  local report = require "mk.study.report"
  local data, err = report.load(dir)
  if not data then return fail(req, 404, err.message) end
  return req:respond(200, report.html(data), headers("text/html; charset=utf-8"))
end

-- ---- watched runs and their streams ------------------------------------------

-- The run with this id, followed from its files, or from the engine itself
-- when it is the run this engine is writing (o.run of M.start).
function Server:watch(id)
  local w = self.watches[id]
  if w then return w end
  local dir, why = runs.resolve(self.root, id)
  if not dir then return nil, why end
  if not fs.exists(dir .. "/run.json") then return nil, "not a run" end
  if self.run and id == self.single then
    w = runs.feed(self.run)
    w.on_change = function() self:soon(w) end -- counted in w.cpu_s
  else
    w = runs.watch(dir)
    w:poll()
  end
  w.id, w.streams, w.sent_at = id, {}, task.now()
  self.watches[id] = w
  return w
end

local function sse(name, v) return "event: " .. name .. "\ndata: " .. json.encode(v) .. "\n\n" end

-- Push text to every stream of w (within `within` seconds: mk.httpd
-- holds it to go out with later sends); forget those whose client went away.
local function broadcast(w, text, within)
  local keep = {}
  for _, s in ipairs(w.streams) do
    if s:send(text, within) then keep[#keep + 1] = s end
  end
  w.streams = keep
  w.sent_at = task.now()
end

-- Push what is new in w (mk.ui.runs: read from its files, or handed over
-- by the engine) to its streams, within `within` seconds (default at
-- once). Returns whether anything was sent.
function Server:tick(w, within) -- luacheck: ignore 212/self
  local nodes, events, changed = w:poll()
  local parts = {}
  if #nodes > 0 then
    local list = {}
    for i, n in ipairs(nodes) do list[i] = runs.public_node(n, w.pool) end
    parts[#parts + 1] = sse("nodes", list)
  end
  if #events > 0 or w.moved then
    parts[#parts + 1] = sse("events", { events = events, curve = w.curve, spent = w.spent, best = w.best })
    w.moved = false
  end
  if changed then parts[#parts + 1] = sse("info", w.info) end
  for _, e in ipairs(events) do
    if e.type == "question" or e.type == "decision" then
      parts[#parts + 1] = sse("questions", w:questions())
      break
    end
  end
  if #parts == 0 then return false end
  broadcast(w, table.concat(parts), within)
  return true
end

-- fn(...), its CPU time counted as the viewer's.
function Server:timed(fn, ...)
  local c0 = os.clock()
  fn(...)
  self.cpu_s = self.cpu_s + (os.clock() - c0)
end

-- The ticker of a run followed from its files: looks every TICK_S while it
-- has streams.
function Server:tick_loop(w)
  while #w.streams > 0 and not self.closed do
    task.sleep(M.TICK_S)
    self:timed(self.tick, self, w)
    self:heartbeat(w)
  end
  w.ticker = nil
end

-- An idle stream still gets a comment every HEARTBEAT_S (a client that went
-- away is noticed and forgotten).
function Server:heartbeat(w) -- luacheck: ignore 212/self
  if task.now() - w.sent_at >= M.HEARTBEAT_S then broadcast(w, ": still here\n\n") end
end

-- The keeper of a run fed by the engine: nothing to look at, only the
-- heartbeat, while it has streams.
function Server:keep_loop(w)
  while #w.streams > 0 and not self.closed do
    task.sleep(M.HEARTBEAT_S)
    self:heartbeat(w)
  end
  w.ticker = nil
end

-- The engine committed something to a fed run: it is encoded at once,
-- while the engine's code and data are still in the caches (no task wakes
-- for it), and goes out within TICK_S, in one write with whatever else
-- comes meanwhile (mk.httpd holds it). With no page open it is only
-- folded into the run's state.
function Server:soon(w)
  if #w.streams == 0 or self.closed then
    w:poll()
    return
  end
  self:tick(w, M.TICK_S)
end

function Server:live(req, id)
  local w, why = self:watch(id)
  if not w then return fail(req, 404, why) end
  self:tick(w) -- what is new reaches the pages already open; this one gets it in its state
  local h = headers("text/event-stream; charset=utf-8")
  req:stream(200, h)
  req:send("retry: 1000\n\n" .. sse("state", w:state()))
  w.streams[#w.streams + 1] = req
  if not w.ticker then w.ticker = task.spawn(w.run and self.keep_loop or self.tick_loop, self, w) end
end

-- ---- writes --------------------------------------------------------------------

function Server:authorised(req)
  local tok = req.headers["x-mk-token"]
  return type(tok) == "string" and tok == self.token
end

function Server:answer(req, w) -- luacheck: ignore 212/self
  local a = json.decode(req.body)
  if type(a) ~= "table" or type(a.id) ~= "string" then return fail(req, 400, "send {id, verb, text?, choice?} as JSON") end
  local d, err = ask.answer(w.dir, a.id, { verb = a.verb, text = a.text, choice = a.choice }, a.by or "browser")
  if d then return send_json(req, 200, { decision = d }) end
  if err.kind == "answered" then return send_json(req, 409, { error = err.message, decision = err.decision }) end
  if err.kind == "no_question" then return fail(req, 404, err.message) end
  if err.kind == "bad_answer" then return fail(req, 400, err.message) end
  return fail(req, 500, err.message)
end

function Server:stop(req, w)
  self:tick(w)
  local session = math.tointeger(w.info.resumed) or 0
  local ok, err = fs.write(w.dir .. "/stop.json", json.encode { by = "browser", session = session, at = os.time() } .. "\n",
    { atomic = true, sync = true })
  if not ok then return fail(req, 500, err and err.message or "cannot write stop.json") end
  return send_json(req, 200, { stopping = true })
end

function Server:write(req, rest)
  if req.method ~= "POST" then return fail(req, 405, "use POST") end
  if not self:authorised(req) then
    return fail(req, 403, "this needs the token mkengine printed when it started (X-MK-Token header)")
  end
  local id, verb = rest:match("^(.-)/(%a+)$")
  local w, why = self:watch(id or "")
  if not w then return fail(req, 404, why) end
  if verb == "answer" then return self:answer(req, w) end
  if verb == "stop" then return self:stop(req, w) end
  return fail(req, 404, "unknown action " .. tostring(verb))
end

-- ---- routing -------------------------------------------------------------------

local function unescape(s)
  return (s:gsub("%%(%x%x)", function(h) return string.char(tonumber(h, 16)) end))
end

function Server:get(req, path)
  if path == "/" or path == "/index.html" then return self:page(req, "index.html") end
  if path == "/favicon.ico" then return req:respond(204, "", NO_STORE) end
  if path:match("^/run/") or path == "/run" then return self:page(req, "run.html") end
  local name = path:match("^/assets/(.+)$")
  if name then return self:asset(req, name) end
  if path == "/api/runs" then return send_json(req, 200, { runs = runs.list(self.root), single = self.single }) end
  local rid = path:match("^/report/(.*)$")
  if rid then return self:report_page(req, rid) end
  local lid = path:match("^/api/live/(.*)$")
  if lid then return self:live(req, lid) end
  local nrun, nid = path:match("^/api/node/(.*)/(n%d+)$")
  if nrun then
    local w, why = self:watch(nrun)
    if not w then return fail(req, 404, why) end
    self:tick(w) -- a node committed since the last look is known
    local d, err = require("mk.ui.node").details(w, nid) -- loaded at the first click, not by every --ui run
    if not d then return fail(req, 404, err) end
    return send_json(req, 200, d)
  end
  return fail(req, 404, "no such page: " .. path)
end

-- Requests from other origins (DNS rebinding) are refused: the Host header
-- must name the address this server listens on.
function Server:host_ok(req)
  local host = req.headers.host or ""
  return host == self.host .. ":" .. self.port or host == "localhost:" .. self.port
    or (self.host == "0.0.0.0" and host ~= "")
end

function Server:handle(req)
  if not self:host_ok(req) then return fail(req, 421, "unexpected Host header") end
  local path = unescape(req.path)
  if path:find("%.%.") or path:find("%z") then return fail(req, 400, "bad path") end
  local rest = path:match("^/api/run/(.+)$")
  if rest then return self:write(req, rest) end
  if req.method ~= "GET" and req.method ~= "HEAD" then return fail(req, 405, "method not allowed") end
  return self:get(req, path)
end

function Server:serve_loop()
  while true do
    local req = self.srv:next()
    if not req then break end
    task.spawn(function()
      local c0 = os.clock()
      local ok, err = pcall(self.handle, self, req)
      self.cpu_s = self.cpu_s + (os.clock() - c0)
      if not ok then
        io.stderr:write("mkengine serve: ", tostring(err), "\n")
        pcall(fail, req, 500, "internal error: " .. tostring(err))
      end
    end)
  end
end

--- Start serving. o: root (directory of runs, or one run), host (default
--- 127.0.0.1), port (0: a free one), single (the id of the run shown first;
--- "" when root is itself a run), run (the mk.search.rundir run this engine
--- is writing, `run --ui`: the run `single` names is then followed from
--- the engine, not from its files). Returns the server {url, token, port};
--- :close() stops.
function M.start(o)
  local srv, err = httpd.listen { host = o.host or "127.0.0.1", port = o.port or 0 }
  if not srv then return nil, err end
  local single = o.single
  if single == nil and (o.run or fs.exists(o.root .. "/run.json")) then single = "" end
  local self = setmetatable({ srv = srv, root = o.root, host = o.host or "127.0.0.1", port = srv:port(),
    token = o.token or new_token(), watches = {}, single = single, run = o.run, cpu_s = 0 }, Server)
  local shown = self.host == "0.0.0.0" and "127.0.0.1" or self.host
  self.url = string.format("http://%s:%d/", shown, self.port)
  if single then self.url = self.url .. "run/" .. single end
  self.loop = task.spawn(self.serve_loop, self)
  return self
end

--- Count `seconds` of CPU spent for the viewer outside its own calls
--- (loading its modules) as its cost.
function Server:charge(seconds)
  self.cpu_s = self.cpu_s + seconds
  self.load_cpu_s = (self.load_cpu_s or 0) + seconds
end

--- CPU seconds the viewer cost this engine so far: its Lua work (loading
--- it, requests, ticks, pushes, and taking what a fed run's engine hands
--- over) and the HTTP library's; then, of that, the loading and the
--- library's.
---@return number total, number loading, number library
function Server:cpu()
  local st = self.srv and not self.closed and self.srv:stats()
  self.lib_cpu_s = st and st.cpu_s or self.lib_cpu_s or 0
  local fed = 0
  for _, w in pairs(self.watches) do fed = fed + w.cpu_s end
  return self.cpu_s + self.lib_cpu_s + fed, self.load_cpu_s or 0, self.lib_cpu_s
end

function Server:close()
  self:cpu()
  self.closed = true
  for _, w in pairs(self.watches) do
    w.polls = 0 -- the last look reads run.json too: the page sees how the run ended
    pcall(self.timed, self, self.tick, self, w)
    for _, s in ipairs(w.streams) do s:close() end
    w.streams = {}
    w:close()
    if w.ticker then w.ticker:cancel() end
  end
  self.srv:close()
end

return M
