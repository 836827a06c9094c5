--- Shared checks for the CPU-suite bank tests (tests/lua/suite_banks*_test.lua):
--- bank structure, and every bank kernel evaluated through mk.eval against
--- its `expect`. Split over two test files so each stays well inside the
--- per-test timeout on a loaded 2-core machine.
---
--- A "fast" or "slow" kernel must be correct (search tests and held-out
--- seeds); whether it is faster or slower than the reference depends on
--- the machine and its load, so that half of its label is measured by
--- bench/suite_bench.lua (BENCHMARKS.md), never asserted here. Correctness
--- verdicts are never retried. MK_SUITE_TASKS=a,b limits the run to some
--- tasks.
local fs = require "mk.fs"
local eval = require "mk.eval"
local targets = require "mk.eval.targets"
local task_lib = require "mk.services.task"

local M = {}

M.SUITE = "examples/suites/cpu"
M.EXPECTS = { fast = true, slow = true, incorrect = true, compile_error = true }
-- LLM-style operators; every other suite task is a KernelBench level-2 style fusion
M.LLM_STYLE = { rmsnorm = true, softmax = true, layernorm = true, add_layernorm = true, attention = true,
  cross_entropy = true, swiglu_mlp = true }
-- short benchmarks: enough for the margins the bank kernels have
M.EVAL_OPTS = { jobs = 2, bench = { min_time = 0.1, warmup = 1, min_reps = 3, max_reps = 10 } }

--- All task directories of the suite (sorted names).
function M.all_tasks()
  local names = {}
  for _, name in ipairs(fs.list(M.SUITE)) do
    if fs.isdir(M.SUITE .. "/" .. name) then names[#names + 1] = name end
  end
  table.sort(names)
  return names
end

--- The tasks of one kind ("llm" or "fused"), filtered by MK_SUITE_TASKS.
function M.tasks(kind)
  local only = os.getenv("MK_SUITE_TASKS")
  local keep
  if only and only ~= "" then
    keep = {}
    for n in only:gmatch("[^,%s]+") do keep[n] = true end
  end
  local out = {}
  for _, n in ipairs(M.all_tasks()) do
    local is_llm = M.LLM_STYLE[n] == true
    if (kind == nil or (kind == "llm") == is_llm) and (not keep or keep[n]) then out[#out + 1] = n end
  end
  return out
end

function M.bank(name) return dofile(M.SUITE .. "/" .. name .. "/scripted/bank.lua") end

function M.ids(bank)
  local ids = {}
  for id in pairs(bank.kernels) do ids[#ids + 1] = id end
  table.sort(ids)
  return ids
end

--- nil when result r has the verdict `expect` promises, else a reason:
--- compile_error and incorrect are statuses; fast and slow are correct
--- kernels with a measured speedup (its direction is the bench's to say).
function M.unmet(expect, r)
  if expect == "compile_error" or expect == "incorrect" then
    if r.status ~= expect then return string.format("status %s (%s)", r.status, r.message or "") end
    return nil
  end
  if r.status ~= "ok" or not r.correct then
    return string.format("status %s (%s)", r.status, r.message or "")
  end
  if type(r.speedup) ~= "number" or r.speedup ~= r.speedup or r.speedup <= 0 then
    return "no speedup measured: " .. tostring(r.speedup)
  end
  return nil
end

--- Assert the bank of task `name` is well formed (uses t's assertions).
function M.check_structure(t, name)
  local dir = M.SUITE .. "/" .. name
  local task, err = targets.load_task(dir)
  t.ok(task, err and err.message)
  t.eq(task.target, "c")
  t.eq(task.name, name)
  local c = targets.get("c")
  local bank = M.bank(name)
  t.ok(#bank.plans >= 3, "plans: " .. #bank.plans)
  local ids = M.ids(bank)
  t.ok(#ids >= 6, "kernels: " .. #ids)
  local seen, planned, tunable_ok = {}, {}, false
  for _, p in ipairs(bank.plans) do
    t.ok(type(p.id) == "string" and type(p.title) == "string" and type(p.text) == "string" and #p.text > 150,
      "plan id, title and prose for " .. tostring(p.id))
    t.ok(#p.kernels >= 1, "plan " .. p.id .. " names kernels")
    for _, k in ipairs(p.kernels) do
      t.ok(bank.kernels[k], "plan " .. p.id .. " names unknown kernel " .. k)
      planned[k] = true
    end
  end
  for _, id in ipairs(ids) do
    local k = bank.kernels[id]
    t.ok(M.EXPECTS[k.expect], id .. ": bad expect " .. tostring(k.expect))
    seen[k.expect] = true
    t.ok(planned[id], id .. " belongs to no plan")
    local src = fs.read(dir .. "/scripted/" .. k.file)
    t.ok(src, "missing file " .. k.file)
    if k.expect == "compile_error" then
      local fix = bank.kernels[k.fix or ""]
      t.ok(fix and fix.expect ~= "compile_error", id .. ": fix must name a compiling kernel")
    end
    if #c.tunables(src) > 0 and (k.expect == "fast" or k.expect == "slow") then tunable_ok = true end
  end
  for e in pairs(M.EXPECTS) do t.ok(seen[e], "no kernel expected " .. e) end
  t.ok(tunable_ok, "no correct kernel declares a // mk:tune line")
end

--- Evaluate every bank kernel of task `name` and assert its expect. Kernels
--- are evaluated concurrently (compiles overlap; benchmarks hold the device
--- exclusively inside mk.eval), held-out checks follow.
function M.check_verdicts(t, name)
  local dir = M.SUITE .. "/" .. name
  local bank = M.bank(name)
  local ids = M.ids(bank)
  local ev = eval.new(dir, M.EVAL_OPTS)
  local failures = {}
  local ok, err = pcall(function()
    ev:freeze()
    ev:baseline()
    local srcs, handles = {}, {}
    for i, id in ipairs(ids) do
      srcs[i] = fs.read(dir .. "/scripted/" .. bank.kernels[id].file)
      handles[i] = task_lib.spawn(function() return ev:evaluate(srcs[i], { tune = false }) end)
    end
    for i, id in ipairs(ids) do
      local k = bank.kernels[id]
      local r = task_lib.await(handles[i])
      local why = M.unmet(k.expect, r)
      if not why and (k.expect == "fast" or k.expect == "slow") then
        local h = ev:heldout(srcs[i])
        if not h.correct then why = "fails the held-out seeds: " .. (h.message or "") end
      end
      print(string.format("  %-22s %-13s -> %-13s %s", id, k.expect, r.status,
        r.speedup and string.format("%.2fx", r.speedup) or ""))
      if why then failures[#failures + 1] = id .. " (" .. k.expect .. "): " .. why end
    end
  end)
  ev:close()
  if not ok then error(err, 0) end
  t.ok(#failures == 0, table.concat(failures, "\n"))
end

return M
