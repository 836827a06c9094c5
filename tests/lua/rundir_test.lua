-- Behaviour of mk.search.rundir and the show/tree/diff/resume commands: layout,
-- events, summary, best/ checkout, locking, validation of bad run dirs
-- (clear message, exit 2, nothing modified).
local t = dofile("tests/lua/lib/t.lua")
local fs = require "mk.fs"
local rundir = require "mk.search.rundir"
local json = require "cjson"

local MK = (os.getenv("MKENGINE_BUILD") or "build") .. "/mkengine"

local sh = t.sh

local function lines_of(path)
  local out = {}
  for line in (fs.read(path) or ""):gmatch("[^\n]+") do out[#out + 1] = json.decode(line) end
  return out
end

-- every file under dir with its size and mtime, to prove nothing changed
local function snapshot(dir)
  local _, out = sh("find " .. dir .. " -printf '%p %s %T@\\n' | sort")
  return out
end

local function new_run(extra)
  local o = { root = t.tmpdir("mk-rundir-test"), strategy = "beam", task = "examples/tasks/softmax/",
    seed = 7, model = "scripted", options = { width = 3 } }
  for k, v in pairs(extra or {}) do o[k] = v end
  return assert(rundir.create(o))
end

local function populate(run)
  local g = run.graph
  local r = g:add{ kind = "root", key = "root", files = { ["kernel.c"] = "ref\n" }, metrics = { latency_s = 1e-3, speedup = 1 } }
  local a = g:add{ kind = "implement", key = "a", parents = { r }, files = { ["kernel.c"] = "a\n" }, plan = "tile rows",
    metrics = { latency_s = 5e-4, speedup = 2 }, cost = { input_tokens = 100, output_tokens = 20 } }
  local b = g:add{ kind = "implement", key = "b", parents = { r }, files = { ["kernel.c"] = "b\n" },
    status = "compile_error", error = "kernel.c:1: error: expected ';' before '}'" }
  local c = g:add{ kind = "tune", key = "c", parents = { a }, files = { ["kernel.c"] = "a2\n" },
    metrics = { latency_s = 2.5e-4, speedup = 4 } }
  return r, a, b, c
end

t.test("create makes the run layout and run.json", function()
  local run = new_run()
  t.matches(run.dir, "/%d%d%d%d%d%d%d%d%-%d%d%d%d%d%d%-beam%-softmax$")
  for _, f in ipairs{ "run.json", "graph.git", "events.jsonl", "tests", "best", ".lock" } do
    t.ok(fs.exists(run:path(f)), f .. " exists")
  end
  local info = json.decode(fs.read(run:path("run.json")))
  t.eq(info.strategy, "beam"); t.eq(info.task, "examples/tasks/softmax/")
  t.eq(info.seed, 7); t.eq(info.model, "scripted"); t.eq(info.status, "running")
  t.eq(info.options.width, 3); t.eq(info.engine_version, require("mk.home").version)
  t.ok(info.started > 0)
  t.ok(not fs.read(run:path("run.json")):find("\\/", 1, true), "paths are not escaped")
  run:close()
end)

t.test("two runs created in the same second get distinct directories", function()
  local root = t.tmpdir("mk-rundir-test")
  local a = assert(rundir.create{ root = root, strategy = "s", task = "t" })
  local b = assert(rundir.create{ root = root, strategy = "s", task = "t" })
  t.ok(a.dir ~= b.dir)
  a:close(); b:close()
  local _, err = rundir.create{ dir = a.dir, strategy = "s", task = "t" }
  t.eq(err.kind, "exists")
end)

t.test("create builds the run under a hidden name, so leftovers of a killed create do not block it", function()
  local root = t.tmpdir("mk-rundir-test")
  -- what a create killed half-way leaves: a hidden, incomplete sibling
  assert(fs.mkdirs(root .. "/.creating-run-123-456/graph.git"))
  local run = assert(rundir.create{ dir = root .. "/run", strategy = "s", task = "t" })
  t.eq(run.dir, root .. "/run")
  t.ok(fs.exists(root .. "/run/run.json"))
  local names = fs.list(root)
  t.eq(#names, 2, table.concat(names, ","))
  run:close()
end)

t.test("events carry t and type, one JSON object per line, including node and best events", function()
  local run = new_run()
  populate(run)
  run:event{ type = "llm_call", model = "m", input_tokens = 5 }
  local ev = lines_of(run:path("events.jsonl"))
  t.eq(ev[1].type, "run_start")
  local kinds = {}
  for i, e in ipairs(ev) do
    t.eq(type(e.t), "number", "event " .. i .. " has t")
    if i > 1 then t.ok(e.t >= ev[i - 1].t, "t is monotonic") end
    kinds[#kinds + 1] = e.type .. (e.id and (":" .. e.id) or "")
  end
  t.eq(table.concat(kinds, " "), "run_start node:n0001 best:n0002 node:n0002 node:n0003 best:n0004 node:n0004 llm_call")
  t.raises(function() run:event{ no_type = true } end, "type")
  run:close()
end)

t.test("listeners get each event as written and each run.json rewrite, in order; a failing one stops nothing", function()
  local run = new_run()
  local got, infos = {}, {}
  local l = { event = function(e, detail) got[#got + 1] = { e = e, detail = detail } end,
    info = function(info) infos[#infos + 1] = info.status end }
  run:listen{ event = function() error("a broken viewer") end }
  run:listen(l)
  populate(run)
  run:event({ type = "question", id = "q1" }, { id = "q1", text = "the whole question" })
  run:set_status("done")
  local kinds = {}
  for i, g in ipairs(got) do kinds[i] = g.e.type .. (g.e.id and (":" .. g.e.id) or "") end
  t.eq(table.concat(kinds, " "), "node:n0001 best:n0002 node:n0002 node:n0003 best:n0004 node:n0004 question:q1")
  t.eq(type(got[1].e.t), "number", "as written: t included")
  t.eq(got[7].detail.text, "the whole question")
  t.ok(not fs.read(run:path("events.jsonl")):find("the whole question", 1, true), "the detail is not written")
  t.same(infos, { "done" })
  run:unlisten(l)
  run:event{ type = "log", message = "after" }
  t.eq(#got, 7, "no event after unlisten")
  t.eq(lines_of(run:path("events.jsonl"))[9].message, "after")
  run:close()
end)

t.test("best/ holds the best node's files and follows it", function()
  local run = new_run()
  local g = run.graph
  local r = g:add{ kind = "root", files = { ["kernel.c"] = "ref\n" } }
  t.eq(#fs.list(run:path("best")), 0)
  local a = g:add{ kind = "implement", parents = { r }, files = { ["kernel.c"] = "a\n", ["sub/x.h"] = "x\n" },
    plan = "p", metrics = { latency_s = 2e-3 } }
  t.eq(fs.read(run:path("best/kernel.c")), "a\n")
  t.eq(fs.read(run:path("best/sub/x.h")), "x\n")
  t.eq(fs.read(run:path("best/plan.md")), "p")
  g:add{ kind = "tune", parents = { a }, files = { ["kernel.c"] = "b\n" }, metrics = { latency_s = 1e-3 } }
  t.eq(fs.read(run:path("best/kernel.c")), "b\n")
  t.ok(not fs.exists(run:path("best/sub/x.h")), "old files are gone")
  t.contains(fs.read(run:path("best/node.json")), '"id": "n0003"')
  run:close()
end)

t.test("write_summary fills nodes, correct_nodes, best and cost", function()
  local run = new_run()
  populate(run)
  run:set_status("done")
  local s = run:write_summary{ cost = { input_tokens = 120, output_tokens = 20, usd = 0.01 } }
  t.eq(s.run_dir, run.dir)
  local disk = json.decode(fs.read(run:path("summary.json")))
  t.eq(disk.strategy, "beam"); t.eq(disk.task, "examples/tasks/softmax/"); t.eq(disk.status, "done")
  t.eq(disk.nodes, 4); t.eq(disk.correct_nodes, 2)
  t.eq(disk.best.node, "n0004"); t.eq(disk.best.speedup, 4); t.eq(disk.best.latency_s, 2.5e-4)
  t.eq(disk.cost.input_tokens, 120); t.eq(disk.cost.usd, 0.01); t.eq(disk.cost.device_s, 0)
  t.eq(type(disk.cost.wall_s), "number")
  t.eq(disk.model, "scripted"); t.eq(disk.seed, 7); t.eq(disk.options.width, 3)
  t.eq(disk.run_dir, nil)
  local info = json.decode(fs.read(run:path("run.json")))
  t.eq(info.status, "done"); t.ok(info.ended >= info.started)
  run:close()
  local empty = new_run()
  local s2 = empty:write_summary{}
  t.eq(s2.best, json.null)
  t.contains(fs.read(empty:path("summary.json")), '"best":null')
  empty:close()
end)

t.test("a second engine cannot open a locked run; it can after close", function()
  local run = new_run()
  local r2, err = rundir.open(run.dir)
  t.eq(r2, nil); t.eq(err.kind, "locked")
  t.contains(err.message, "in use")
  local ro = assert(rundir.open(run.dir, { readonly = true }))
  ro:close()
  run:close()
  local r3 = assert(rundir.open(run.dir))
  r3:close()
end)

t.test("open resumes: same nodes, status running, resume event, torn event line dropped", function()
  local run = new_run()
  populate(run)
  local dir = run.dir
  run:close()
  assert(fs.append(dir .. "/events.jsonl", '{"type":"llm_ca'))
  local r2 = assert(rundir.open(dir))
  t.eq(r2.graph:len(), 4)
  t.eq(r2.graph:best().id, "n0004")
  local ev = lines_of(dir .. "/events.jsonl")
  t.eq(ev[#ev].type, "resume"); t.eq(ev[#ev].nodes, 4)
  t.eq(r2.info.resumed, 1)
  local n = r2.graph:add{ kind = "tune", key = "c", parents = { "n0002" } }
  t.eq(n.id, "n0004", "keyed step answered from the graph")
  r2:close()
end)

t.test("open of bad run directories: clear error kind, nothing modified", function()
  local root = t.tmpdir("mk-rundir-test")
  local _, e1 = rundir.open(root .. "/missing")
  t.eq(e1.kind, "not_a_run")
  local _, e2 = rundir.open(root)
  t.eq(e2.kind, "not_a_run"); t.contains(e2.message, "run.json")
  -- missing graph.git
  local run = new_run()
  populate(run)
  run:close()
  assert(fs.rename(run:path("graph.git"), run:path("graph.moved")))
  local before = snapshot(run.dir)
  local _, e3 = rundir.open(run.dir)
  t.eq(e3.kind, "corrupt"); t.contains(e3.message, "graph.git")
  t.eq(snapshot(run.dir), before)
  -- graph.git that is not a repository
  assert(fs.mkdirs(run:path("graph.git")))
  assert(fs.write(run:path("graph.git/HEAD"), "garbage"))
  before = snapshot(run.dir)
  local _, e4 = rundir.open(run.dir)
  t.eq(e4.kind, "corrupt")
  t.eq(snapshot(run.dir), before)
  -- corrupt run.json
  assert(fs.rm_rf(run:path("graph.git")))
  assert(fs.rename(run:path("graph.moved"), run:path("graph.git")))
  assert(fs.write(run:path("run.json"), "{not json"))
  before = snapshot(run.dir)
  local _, e5 = rundir.open(run.dir)
  t.eq(e5.kind, "corrupt")
  t.eq(snapshot(run.dir), before)
end)

t.test("show lists nodes and shows one node with plan, code and error", function()
  local run = new_run()
  populate(run)
  run:close()
  local rc, out = sh(MK .. " show " .. run.dir)
  t.eq(rc, 0, out)
  t.contains(out, "strategy beam")
  t.matches(out, "\n%* n0004%s+n0002%s+tune%s+ok%s+250%.0 us%s+4%.00x%s+0")
  t.matches(out, "\n  n0002%s+n0001%s+implement%s+ok%s+500%.0 us%s+2%.00x%s+120")
  t.matches(out, "\n  n0003%s+n0001%s+implement%s+compile_error%s+%-%s+%-%s+0")
  local rc2, one = sh(MK .. " show " .. run.dir .. " n0002")
  t.eq(rc2, 0, one)
  t.contains(one, "plan:\ntile rows")
  t.contains(one, "--- kernel.c ---\na\n")
  t.contains(one, "latency_s")
  local _, err = sh(MK .. " show " .. run.dir .. " 3")
  t.contains(err, "error:\nkernel.c:1: error: expected ';' before '}'")
  local rc3, js = sh(MK .. " show --json " .. run.dir)
  t.eq(rc3, 0)
  local doc = json.decode(js)
  t.eq(#doc.nodes, 4); t.eq(doc.best, "n0004")
end)

t.test("tree draws the search tree with the best path marked; only children stay in the column", function()
  local run = new_run()
  populate(run)
  run:close()
  local rc, out = sh(MK .. " tree " .. run.dir)
  t.eq(rc, 0, out)
  t.contains(out, "* n0001 root ok")
  t.contains(out, "├── * n0002 implement ok 500.0 us 2.00x")
  t.contains(out, "│   * n0004 tune ok 250.0 us 4.00x  <- best")
  t.contains(out, "└──   n0003 implement compile_error")
end)

t.test("diff shows the patch and stat between two nodes", function()
  local run = new_run()
  populate(run)
  run:close()
  local rc, out = sh(MK .. " diff " .. run.dir .. " n0002 best")
  t.eq(rc, 0, out)
  t.contains(out, "kernel.c")
  t.contains(out, "-a\n+a2\n")
  local _, st = sh(MK .. " diff --stat " .. run.dir .. " 2 4")
  t.ok(not st:find("+a2", 1, true))
  t.contains(st, "files changed")
end)

t.test("show/tree/diff/resume on bad input exit 2 with one clear line", function()
  local run = new_run()
  populate(run)
  run:close()
  local root = t.tmpdir("mk-rundir-test")
  local cases = {
    { MK .. " show " .. root, "not a run directory" },
    { MK .. " tree " .. root .. "/nope", "not a directory" },
    { MK .. " show " .. run.dir .. " n0099", "no node 'n0099'" },
    { MK .. " diff " .. run.dir .. " n0001 n0042", "no node 'n0042'" },
    { MK .. " diff " .. run.dir .. " n0001", "expected RUN A B" },
    { MK .. " resume " .. root, "not a run directory" },
  }
  for _, c in ipairs(cases) do
    local rc, out = sh(c[1])
    t.eq(rc, 2, c[1] .. ": " .. out)
    t.contains(out, c[2])
  end
end)

t.test("resume refuses a run another engine holds: exit 2, nothing modified", function()
  local run = new_run()
  populate(run)
  local before = snapshot(run.dir)
  local rc, out = sh(MK .. " resume " .. run.dir)
  t.eq(rc, 2, out); t.contains(out, "in use")
  t.eq(snapshot(run.dir), before)
  run:close()
end)

t.test("show works on a run that another engine holds (readonly, no lock)", function()
  local run = new_run()
  populate(run)
  local rc, out = sh(MK .. " show " .. run.dir)
  t.eq(rc, 0, out)
  t.contains(out, "n0004")
  run:close()
end)

return t.run()
