--- mk.study.compare.text: a comparison (mk.study.compare.run's result) as
--- plain text: the budget, one row per strategy at the budget, per pair
--- the per-task ratios, the verdict and what the interval says about
--- repeats; and the notes on what limits the comparison, which the HTML
--- page shows too.
local budget_text = require("mk.study.compare.budget").budget_text

local text = {}

local function fx(x) return x and string.format("%.2fx", x) or "-" end

local function tok(c) return (c.input_tokens or 0) + (c.output_tokens or 0) end
text.fx, text.tok = fx, tok

--- The comparison as plain text: the budget, one row per strategy (at the
--- budget), then per pair the per-task ratios, the verdict and what the
--- interval says about repeats.
---@param result table from compare.run
---@return string
function text.format(result)
  local L = {}
  local b = result.budget
  L[#L + 1] = string.format("budget: %s (%s)", b.text, b.source == "default"
    and "default: the largest run of the bench that spent least, so no run counts more" or "given")
  local w = 8
  for _, s in ipairs(result.strategies) do w = math.max(w, #s.name) end
  local hdr = string.format("%-" .. w .. "s %5s %8s %7s %8s %8s %6s %8s %10s %10s %9s %9s",
    "strategy", "tasks", "compiled", "correct", "geomean", "floored", "fast_1", "runs cut", "unverified", "tokens", "USD", "device")
  L[#L + 1] = ""
  L[#L + 1] = hdr
  L[#L + 1] = string.rep("-", #hdr)
  for _, s in ipairs(result.strategies) do
    L[#L + 1] = string.format("%-" .. w .. "s %5d %8d %7d %8s %8s %6.2f %8s %10d %10d %9s %8.1fs", s.name, s.tasks,
      s.compiled, s.correct, fx(s.geomean_speedup), fx(s.geomean_speedup_floored), s.fast_p["1"] or 0,
      string.format("%d/%d", s.runs_cut, s.runs), s.unverified_runs, tok(s.spent), string.format("$%.4f", s.spent.usd or 0),
      s.spent.device_s or 0)
  end
  L[#L + 1] = "(figures at the budget: each run counts the best kernel found within it; tokens, USD, device: what the runs spent in all)"
  for _, note in ipairs(text.notes(result.strategies)) do L[#L + 1] = note end
  for _, p in ipairs(result.pairs) do
    L[#L + 1] = ""
    L[#L + 1] = string.format("%s vs %s: per task, ratio of median-repeat speedups %s/%s (failed = 1.0)", p.b, p.a, p.b, p.a)
    local tw = 4
    for _, r in ipairs(result.per_task) do tw = math.max(tw, #r.task) end
    L[#L + 1] = string.format("  %-" .. tw .. "s %9s %9s %8s  %-15s %s", "task", "A", "B", "B/A", "CI (repeats)", "")
    for _, r in ipairs(result.per_task) do
      if r.b == p.b then
        L[#L + 1] = string.format("  %-" .. tw .. "s %9s %9s %8s  %-15s %s", r.task, fx(r.a_speedup), fx(r.b_speedup),
          fx(r.ratio), string.format("%.2f-%.2f", r.ci_low, r.ci_high), r.outcome)
      end
    end
    L[#L + 1] = string.format("geomean ratio %.2fx, %g %% CI %.2f-%.2f (bootstrap over tasks and repeats, %d replicates); "
      .. "wins %d, ties %d, losses %d of %d tasks", p.geomean_ratio, p.level * 100, p.ci_low, p.ci_high, p.replicates,
      p.wins, p.ties, p.losses, p.tasks)
    L[#L + 1] = "verdict: " .. p.verdict
    if p.suggest and not p.suggest.decided then L[#L + 1] = "repeats: " .. p.suggest.reason end
  end
  return table.concat(L, "\n") .. "\n"
end

--- Notes on what limits the comparison (a list of lines, maybe empty):
--- benches run under different `--budget`s (a run stopped by a smaller one
--- could not spend up to the compared budget), and runs whose spend per
--- node had to be rebuilt from llm events.
function text.notes(strategies)
  local out = {}
  for _, s in ipairs(strategies) do -- simulated benches say so (mk.services.sim.task.note)
    if s.simulation then out[#out + 1] = s.simulation break end
  end
  local budget_note = text.run_budget_note(strategies)
  if budget_note then out[#out + 1] = budget_note end
  local rebuilt, runs = 0, 0
  for _, s in ipairs(strategies) do rebuilt, runs = rebuilt + (s.rebuilt_runs or 0), runs + (s.runs or 0) end
  if rebuilt > 0 then
    out[#out + 1] = string.format("note: %d of %d runs predate per-node spend records: their tokens, USD and LLM seconds "
      .. "at each node are rebuilt from llm events, which runs going at once in one bench process can mix up "
      .. "(wall-second budgets are exact for them)", rebuilt, runs)
  end
  return out
end

--- The note on different `--budget`s of the benches, or nil.
function text.run_budget_note(strategies)
  local texts, differ = {}, false
  for i, s in ipairs(strategies) do
    texts[i] = type(s.run_budget) == "table" and next(s.run_budget) and budget_text(s.run_budget) or "no limit"
    if texts[i] ~= texts[1] then differ = true end
  end
  if not differ then return nil end
  local bits = {}
  for i, s in ipairs(strategies) do bits[i] = s.name .. ": " .. texts[i] end
  return "note: the benches ran under different --budget limits (" .. table.concat(bits, "; ")
    .. "); a run stopped by its own limit could not spend up to the compared budget"
end

return text
