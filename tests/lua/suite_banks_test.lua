-- The CPU suite (examples/suites/cpu): every task loads, every scripted-model
-- bank is well formed, and every bank kernel gets the verdict its `expect`
-- promises when it goes through the real evaluation path (mk.eval: sandboxed
-- compile, frozen tests, benchmark against the reference, held-out seeds).
--
-- Timing on a shared 2-core machine is noisy, so the speed half of an
-- expectation ("fast": speedup > 1, "slow": speedup < 1) is re-measured once
-- with a fresh evaluator (new baseline, same frozen tests) before it fails.
-- Correctness verdicts are never retried. MK_SUITE_TASKS=a,b limits the run
-- to some tasks; MK_TEST_ONLY=<name part> to some test cases.
local t = dofile("tests/lua/lib/t.lua")
local fs = require "mk.fs"
local eval = require "mk.eval"
local targets = require "mk.targets"

local SUITE = "examples/suites/cpu"
local EXPECTS = { fast = true, slow = true, incorrect = true, compile_error = true }
-- LLM-style operators; every other suite task is a KernelBench level-2 style fusion
local LLM_STYLE = { rmsnorm = true, softmax = true, layernorm = true, attention = true,
  cross_entropy = true, swiglu_mlp = true }
-- short benchmarks: enough for the large margins the bank kernels have
local EVAL_OPTS = { jobs = 2, bench = { min_time = 0.25, warmup = 1, min_reps = 3, max_reps = 30 } }

local function task_names()
  local names = {}
  for _, e in ipairs(fs.list(SUITE)) do
    local name = type(e) == "table" and e.name or e
    if fs.isdir(SUITE .. "/" .. name) then names[#names + 1] = name end
  end
  table.sort(names)
  local only = os.getenv("MK_SUITE_TASKS")
  if only and only ~= "" then
    local keep = {}
    for n in only:gmatch("[^,%s]+") do keep[n] = true end
    local out = {}
    for _, n in ipairs(names) do if keep[n] then out[#out + 1] = n end end
    names = out
  end
  return names
end

local function load_bank(name)
  return dofile(SUITE .. "/" .. name .. "/scripted/bank.lua")
end

local function sorted_ids(bank)
  local ids = {}
  for id in pairs(bank.kernels) do ids[#ids + 1] = id end
  table.sort(ids)
  return ids
end

-- nil when the result meets the expectation, else the reason it does not
local function unmet(expect, r)
  if expect == "compile_error" or expect == "incorrect" then
    if r.status ~= expect then return string.format("status %s (%s)", r.status, r.message or "") end
    return nil
  end
  if r.status ~= "ok" or not r.correct then
    return string.format("status %s (%s)", r.status, r.message or "")
  end
  if expect == "fast" and not (r.speedup > 1.0) then
    return string.format("speedup %.2f, expected > 1", r.speedup), "timing"
  end
  if expect == "slow" and not (r.speedup < 1.0) then
    return string.format("speedup %.2f, expected < 1", r.speedup), "timing"
  end
  return nil
end

t.test("the cpu suite has at least 12 tasks, a third of them LLM-style operators", function()
  local all = {}
  for _, e in ipairs(fs.list(SUITE)) do
    local name = type(e) == "table" and e.name or e
    if fs.isdir(SUITE .. "/" .. name) then all[#all + 1] = name end
  end
  t.ok(#all >= 12, "suite tasks: " .. #all)
  local llm = 0
  for _, n in ipairs(all) do if LLM_STYLE[n] then llm = llm + 1 end end
  t.ok(llm * 3 >= #all, string.format("%d LLM-style of %d", llm, #all))
  t.ok(#all - llm >= 6, "fused tasks: " .. (#all - llm))
end)

for _, name in ipairs(task_names()) do
  local dir = SUITE .. "/" .. name

  t.test(name .. ": task loads as a C task and its bank is well formed", function()
    local task, err = targets.load_task(dir)
    t.ok(task, err and err.message)
    t.eq(task.target, "c")
    t.eq(task.name, name)
    local c = targets.get("c")
    local bank = load_bank(name)
    t.ok(#bank.plans >= 3, "plans: " .. #bank.plans)
    local ids = sorted_ids(bank)
    t.ok(#ids >= 6, "kernels: " .. #ids)
    local seen, planned, tunable_ok = {}, {}, false
    for _, p in ipairs(bank.plans) do
      t.ok(type(p.id) == "string" and type(p.text) == "string" and #p.text > 150, "plan prose for " .. tostring(p.id))
      t.ok(#p.kernels >= 1, "plan " .. p.id .. " names kernels")
      for _, k in ipairs(p.kernels) do
        t.ok(bank.kernels[k], "plan " .. p.id .. " names unknown kernel " .. k)
        planned[k] = true
      end
    end
    for _, id in ipairs(ids) do
      local k = bank.kernels[id]
      t.ok(EXPECTS[k.expect], id .. ": bad expect " .. tostring(k.expect))
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
    for e in pairs(EXPECTS) do t.ok(seen[e], "no kernel expected " .. e) end
    t.ok(tunable_ok, "no correct kernel declares a // mk:tune line")
  end)

  t.test(name .. ": every bank kernel gets its expected verdict from mk.eval", function()
    local bank = load_bank(name)
    local ev = eval.new(dir, EVAL_OPTS)
    local failures = {}
    local ok, err = pcall(function()
      for _, id in ipairs(sorted_ids(bank)) do
        local k = bank.kernels[id]
        local src = fs.read(dir .. "/scripted/" .. k.file)
        local r = ev:evaluate(src, { tune = false })
        local why, kind = unmet(k.expect, r)
        if why and kind == "timing" then
          -- one re-measurement with a fresh baseline on the same frozen tests
          local ev2 = eval.new(dir, { jobs = 2, bench = EVAL_OPTS.bench, tests_dir = ev.tests_dir })
          local r2 = ev2:evaluate(src, { tune = false })
          ev2:close()
          local why2 = unmet(k.expect, r2)
          why = why2 and (why .. "; again: " .. why2) or nil
          r = r2
        end
        if not why and (k.expect == "fast" or k.expect == "slow") then
          local h = ev:heldout(src)
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
  end)
end

t.test("autotuning a bank's tunable kernel tries its configurations and keeps a correct one", function()
  local name = "matmul_scale_residual"
  if os.getenv("MK_SUITE_TASKS") and not os.getenv("MK_SUITE_TASKS"):find(name, 1, true) then
    t.skip("task not selected by MK_SUITE_TASKS")
  end
  local dir = SUITE .. "/" .. name
  local ev = eval.new(dir, EVAL_OPTS)
  local ok, r = pcall(function()
    local src = fs.read(dir .. "/scripted/blocked_omp.c")
    return ev:evaluate(src, { tune = true, tune_budget = 2 })
  end)
  ev:close()
  if not ok then error(r, 0) end
  t.eq(r.status, "ok", r.message)
  t.ok(r.correct)
  t.ok(r.tune, "no tune record")
  t.eq(#r.tune.tried, 2)
  t.eq(r.tune.space, 4)
  for _, e in ipairs(r.tune.tried) do t.eq(e.status, "ok") end
  t.ok(r.tune.params.KB, "tuned KB")
end)

return t.run()
