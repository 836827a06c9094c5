-- A synthetic keyed search on mk.search.graph + mk.search.rundir, run (and killed) by
-- tests/lua/crash_test.lua: mkengine script tests/crash/search.lua RUN N
-- Creates RUN or resumes it, then runs the whole search from the start;
-- every step is "look up by key, else compute (sleep) and add", the way the
-- runner wraps strategy steps, so a resumed run recomputes nothing that was
-- committed. Prints "committed KEY ID OID" after each add returns.
local fs = require "mk.fs"
local rundir = require "mk.search.rundir"
local task = require "mk.services.task"

local dir, total = arg[1], math.tointeger(tonumber(arg[2] or "200"))
io.stdout:setvbuf("line")

local run, err
if fs.exists(dir .. "/run.json") then
  run, err = rundir.open(dir)
else
  run, err = rundir.create{ dir = dir, strategy = "crash", task = "synthetic", seed = 1 }
end
if not run then
  io.stderr:write("search: ", err.kind, ": ", err.message, "\n")
  return 3
end
for _, p in ipairs(run.graph.problems) do print("repaired " .. p) end
print("opened " .. run.graph:len())
local g = run.graph

-- the parents of step i: a binary tree, with a merge every 7th step
local function parent_keys(i)
  if i == 1 then return {} end
  if i % 7 == 0 then return { "s" .. (i - 1), "s" .. (i - 2) } end
  return { "s" .. (i // 2) }
end

local function step(i)
  local key = "s" .. i
  local n = g:by_key(key)
  if n then return n end
  task.sleep(0.001 * (i % 3))   -- "compute" the step
  local parents = {}
  for j, k in ipairs(parent_keys(i)) do parents[j] = assert(g:by_key(k), "parent " .. k .. " missing") end
  local lat = 1e-3 * (1 + ((i * 7919) % 997) / 997)
  n = assert(g:add{ key = key, kind = i == 1 and "root" or "implement", parents = parents,
    files = { ["kernel.c"] = ("/* step " .. i .. " */\n") .. string.rep("x = x + 1;\n", 200) },
    plan = "plan for " .. key, metrics = { latency_s = lat, speedup = 1e-3 / lat },
    cost = { input_tokens = i, output_tokens = 2 * i } })
  print(string.format("committed %s %s %s", key, n.id, n.oid))
  run:event{ type = "llm_call", key = key }
  return n
end

for i = 1, total do step(i) end
run:set_status("done")
run:write_summary{}
run:close()
print("done")
return 0
