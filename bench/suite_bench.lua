-- Measure every scripted-bank kernel of a task suite through mk.eval and
-- print one Markdown table row per kernel (task, kernel, expect, verdict,
-- latency, baseline, speedup) plus each task's reference latency.
--
--   build/mkengine script bench/suite_bench.lua [SUITE] [MIN_TIME_S] [TASK,...]
--
-- SUITE defaults to examples/suites/cpu, MIN_TIME_S (seconds of timed calls
-- per benchmark) to 0.5. Kernels are evaluated without autotuning, with the
-- defaults their files declare. The figures in BENCHMARKS.md
-- ("## CPU suite banks") come from this script.
local fs = require "mk.fs"
local eval = require "mk.eval"
local stats = dofile((arg[0]:match("^(.*)/") or ".") .. "/lib/stats.lua")

local suite = arg[1] or "examples/suites/cpu"
local min_time = tonumber(arg[2] or "") or 0.5
local only
if arg[3] and arg[3] ~= "" then
  only = {}
  for n in arg[3]:gmatch("[^,%s]+") do only[n] = true end
end

local function ms(s) return s and string.format("%.2f", s * 1e3) or "-" end

local names = {}
for _, n in ipairs(fs.list(suite)) do
  if fs.isdir(suite .. "/" .. n) and fs.exists(suite .. "/" .. n .. "/scripted/bank.lua")
    and (not only or only[n]) then names[#names + 1] = n end
end
table.sort(names)

local machine = stats.machine()
print(string.format("suite %s, bench min_time %.2f s, %s", suite, min_time, os.date("!%Y-%m-%d %H:%M UTC")))
print("")
print("| task | kernel | expect | verdict | latency ms | baseline ms | speedup |")
print("|---|---|---|---|---|---|---|")
local met, total = 0, 0
for _, name in ipairs(names) do
  local dir = suite .. "/" .. name
  local bank = dofile(dir .. "/scripted/bank.lua")
  local ev = eval.new(dir, { jobs = 2, bench = { min_time = min_time, warmup = 2, min_reps = 5, max_reps = 100 } })
  local ids = {}
  for id in pairs(bank.kernels) do ids[#ids + 1] = id end
  table.sort(ids)
  local ok, err = pcall(function()
    local base = ev:baseline()
    print(string.format("| %s | (reference) | | ok | %s | %s | 1.00 |", name, ms(base.latency_s), ms(base.latency_s)))
    for _, id in ipairs(ids) do
      local k = bank.kernels[id]
      local r = ev:evaluate(fs.read(dir .. "/scripted/" .. k.file), { tune = false })
      local good
      if k.expect == "fast" then good = r.status == "ok" and r.speedup > 1
      elseif k.expect == "slow" then good = r.status == "ok" and r.speedup < 1
      else good = r.status == k.expect end
      total = total + 1
      if good then met = met + 1 end
      print(string.format("| %s | %s | %s | %s%s | %s | %s | %s |", name, id, k.expect, r.status,
        good and "" or " (unmet)", ms(r.latency_s), ms(r.baseline_latency_s),
        r.speedup and string.format("%.2f", r.speedup) or "-"))
    end
  end)
  ev:close()
  if not ok then print(string.format("| %s | (error) | | %s | | | |", name, tostring(err):gsub("\n", " "))) end
end
print("")
print(string.format("%d of %d kernels met their expect", met, total))
stats.report(machine)
