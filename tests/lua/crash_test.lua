-- Crash safety of mk.search.graph + mk.search.rundir: a synthetic keyed search
-- (tests/crash/search.lua) is killed with SIGKILL at 20 random moments and
-- resumed each time; then it runs to the end. No node committed before a
-- kill may be lost, changed or duplicated; keys stay unique; `git fsck` is
-- clean right after every kill and at the end; the index, refs, best and
-- events agree.
local t = dofile("tests/lua/lib/t.lua")
local fs = require "mk.fs"
local task = require "mk.services.task"
local graph = require "mk.search.graph"
local json = require "cjson"

local MK = (os.getenv("MKENGINE_BUILD") or "build") .. "/mkengine"
local SCRIPT = "tests/crash/search.lua"
local N = 3000
local KILLS = 20

local sh = t.sh

-- the engine holding the run's lock is gone once the lock can be taken
local function wait_released(dir)
  for _ = 1, 1000 do
    if not fs.exists(dir .. "/.lock") then return true end
    local lk = fs.lock(dir .. "/.lock")
    if lk then
      lk:unlock()
      return true
    end
    task.sleep(0.01)
  end
  return false
end

t.test("20 SIGKILLs at random moments lose, change and duplicate no committed node", function()
  local base = t.tmpdir("mk-crash-test")
  local dir = base .. "/run"
  local log = base .. "/log"
  assert(fs.write(log, "\n"))
  local seed = tonumber(os.getenv("MK_CRASH_SEED") or "") or os.time()
  math.randomseed(seed)
  print("seed " .. seed)
  local function opened()
    local _, c = (fs.read(log) or ""):gsub("\nopened ", "")
    return c
  end
  local early = 0
  for k = 1, KILLS do
    local pidfile = base .. "/pid"
    os.remove(pidfile)
    local before = opened()
    os.execute(string.format("sh -c 'echo $$ > %s; exec %s script %s %s %d >> %s 2>&1' &",
      pidfile, MK, SCRIPT, dir, N, log))
    if math.random() < 0.25 then
      -- anywhere in start-up, creation or the repairs of open
      early = early + 1
      task.sleep(math.random() * 0.25)
    else
      -- somewhere in the search (mostly inside commits: they dominate)
      for _ = 1, 1000 do
        if opened() > before then break end
        task.sleep(0.01)
      end
      task.sleep(math.random() * 0.3)
    end
    local pid
    for _ = 1, 200 do
      pid = fs.read(pidfile)
      if pid and pid:match("%d") then break end
      task.sleep(0.005)
    end
    pid = assert(tonumber(pid:match("%d+")), "no pid for run " .. k)
    os.execute("kill -9 " .. pid .. " 2>/dev/null")
    t.ok(wait_released(dir), "engine " .. k .. " did not die")
    -- right after the kill, before any repair: every ref names a whole
    -- commit (objects are written before the ref that names them)
    if fs.exists(dir .. "/graph.git/packed-refs") then
      local frc, fsck = sh("git --git-dir " .. dir .. "/graph.git fsck --strict --no-dangling --connectivity-only")
      t.eq(frc, 0, "fsck after kill " .. k .. ": " .. fsck)
    end
  end
  -- the last run goes to the end
  local rc, out = sh(string.format("%s script %s %s %d >> %s", MK, SCRIPT, dir, N, log))
  t.eq(rc, 0, out)

  -- what the killed engines reported as committed, in order
  local committed, repairs, runs_started, dones, last_opened = {}, {}, 0, 0, nil
  for line in fs.read(log):gmatch("[^\n]+") do
    local key, id, oid = line:match("^committed (%S+) (n%d+) (%x+)$")
    if key and #oid == 40 then
      local prev = committed[key]
      t.eq(prev, nil, "key " .. key .. " committed twice (" .. tostring(prev and prev.id) .. ", " .. id .. ")")
      committed[key] = { id = id, oid = oid }
    end
    local what = line:match("^repaired (.-)[%s:]")
    if what then repairs[#repairs + 1] = line:sub(10) end
    if line == "done" then dones = dones + 1 end
    local o = line:match("^opened (%d+)$")
    if o then last_opened = tonumber(o) end
  end
  for _ in fs.read(dir .. "/events.jsonl"):gmatch('"type":"resume"') do runs_started = runs_started + 1 end
  t.eq(dones, 1)
  t.ok(last_opened and last_opened < N, "the kills all came before the search ended")

  local g = assert(graph.open(dir .. "/graph.git", { readonly = true, verify = true }))
  t.same(g.problems, {}, "final graph needs no repair")
  t.eq(g:len(), N)
  local seen_keys = {}
  for i, n in ipairs(g:nodes()) do
    t.eq(n.id, string.format("n%04d", i), "ids are contiguous")
    t.eq(seen_keys[n.key], nil, "duplicate key " .. tostring(n.key))
    seen_keys[n.key] = true
  end
  for i = 1, N do
    local n = g:by_key("s" .. i)
    t.ok(n, "step s" .. i .. " is in the graph")
    local want = {}
    if i > 1 then
      if i % 7 == 0 then want = { g:by_key("s" .. (i - 1)).id, g:by_key("s" .. (i - 2)).id }
      else want = { g:by_key("s" .. (i // 2)).id } end
    end
    t.same(n.parents, want, "parents of s" .. i)
    t.eq(n:file("kernel.c"):match("^/%* step (%d+) %*/"), tostring(i))
  end
  local nreported = 0
  for key, c in pairs(committed) do
    nreported = nreported + 1
    local n = g:by_key(key)
    t.ok(n, "reported node " .. key .. " lost")
    t.eq(n.id, c.id, "id of " .. key)
    t.eq(n.oid, c.oid, "commit of " .. key)
  end
  t.eq(g.repo:ref("refs/heads/best"), g:best().oid)
  local refs = g.repo:refs("refs/nodes/*")
  t.eq(#refs, N)
  g:close()

  local frc, fsck = sh("git --git-dir " .. dir .. "/graph.git fsck --strict --no-dangling --full")
  t.eq(frc, 0, fsck)
  t.ok(not fsck:find("error") and not fsck:find("missing") and not fsck:find("broken"), fsck)

  -- events: every line parses; a node event at most once per node
  local node_events = {}
  for line in fs.read(dir .. "/events.jsonl"):gmatch("[^\n]+") do
    local ok, e = pcall(json.decode, line)
    t.ok(ok and type(e) == "table" and e.type, "event line parses: " .. line)
    if e.type == "node" then
      t.eq(node_events[e.id], nil, "node event for " .. e.id .. " twice")
      node_events[e.id] = true
    end
  end
  local summary = json.decode(fs.read(dir .. "/summary.json"))
  t.eq(summary.status, "done"); t.eq(math.tointeger(summary.nodes), N)
  print(string.format("kills %d (%d during start-up), resumes %d, nodes when the last run started %d of %d, repairs on open %d:",
    KILLS, early, runs_started, last_opened, N, #repairs))
  local kinds = {}
  for _, r in ipairs(repairs) do
    local k = r:gsub("n%d%d%d%d", "nXXXX"):gsub("/[^ ]+/", "…/"):gsub("tmp_object_git2_%w+", "tmp_object_git2_*")
    kinds[k] = (kinds[k] or 0) + 1
  end
  for k, c in pairs(kinds) do print(string.format("  %3d x %s", c, k)) end
  fs.rm_rf(base)
end)

return t.run()
