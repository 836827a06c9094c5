--- mk.search.records: one kernel, one measurement record. Candidates of a
--- run whose files are identical (same source hash, same tuning) share a
--- record: the first is evaluated; each later one, and each
--- re-measurement a strategy or the runner asks for, benchmarks the same
--- build again and adds a sample. The kernel's figure is the median of the
--- samples (mk.search.figure): every node of the source gets it in memory,
--- the next node of the source commits it, and a sample taken without a
--- new node is written as a `measure` event, so every reader of the run
--- directory finds the same figure (figure.of_run).
---
--- A benchmark the target flagged as taken under contention (`contended`:
--- another process or the hypervisor took the CPU) is kept apart
--- (`flagged`): the figure is the median of the clean samples, and only
--- when there is none the median of the flagged ones, marked `contended`.
---
--- The functions take the ctx (mk.search.context) whose records they keep
--- in ctx._records.
local figure = require("mk.search.figure")
local rng_lib = require("mk.services.rng")
local task_lib = require("mk.services.task")
local util = require("mk.services.util")

local M = {}

--- The source hash of candidate files: names and contents, and whether
--- they are autotuned (a tuned build is a different measurement).
function M.source_hash(files, o)
  local key = util.files_key(files)
  return string.format("%016x", rng_lib.hash((o and o.tune and "tune" or "") .. (key ~= "" and "\1" .. key or "")))
end

local function new_record(hash, o)
  return { hash = hash, samples = {}, flagged = {}, nodes = {}, lock = task_lib.semaphore(1), opts = o }
end

local SHOWN = { "latency_s", "speedup", "measurements", "samples", "flagged", "latency_min_s", "latency_max_s",
  "contended" }

--- A resumed run's records, from the nodes already in the graph and the
--- measure events of its run directory (the same pool every reader uses):
--- every node of a source shows its kernel's figure again, as it did in
--- the session that measured it, so ctx:best() and ctx.better rank the
--- same way. Done once per ctx (ctx.new does it when the graph has nodes).
function M.seed(ctx)
  if ctx._records_seeded then return end
  ctx._records_seeded = true
  local nodes = ctx.graph:nodes()
  local pool = figure.pool()
  for _, n in ipairs(nodes) do pool:add(n) end
  if ctx.run and ctx.run.dir then
    for _, e in ipairs(figure.measures(ctx.run.dir .. "/events.jsonl")) do pool:measure(e) end
  end
  for _, n in ipairs(nodes) do
    local m = n.kind ~= "reference" and n.metrics
    local h = m and m.source_hash
    if h then
      local r = ctx._records[h] or new_record(h, { tune = n.kind == "tune" })
      ctx._records[h] = r
      r.nodes[#r.nodes + 1] = n
      local f = n.status == "ok" and pool:of(n)
      if f then
        for _, k in ipairs(SHOWN) do m[k] = f[k] end
      end
      if not r.result then
        if f then
          r.samples = util.copy(f.samples) or { f.latency_s }
          r.flagged = util.copy(f.flagged) or {}
        end
        r.result = { status = n.status, correct = n.status == "ok", message = n.error, latency_s = m.latency_s,
          baseline_latency_s = m.baseline_latency_s, speedup = m.speedup, spread = m.spread,
          timing_kind = m.timing_kind }
      end
    end
  end
end

--- The record of files (made on first use; a resumed run's are seeded from
--- its graph and events the first time).
function M.record(ctx, files, o)
  M.seed(ctx)
  local hash = M.source_hash(files, o)
  local rec = ctx._records[hash]
  if not rec then
    rec = new_record(hash, o)
    ctx._records[hash] = rec
  end
  return rec
end

-- Add one benchmark's median to the record (a copy: committed nodes keep
-- the lists they were given). Returns whether it added one.
local function add_sample(rec, res)
  if res.status ~= "ok" or type(res.latency_s) ~= "number" then return false end
  local list = res.contended and "flagged" or "samples"
  local xs = table.move(rec[list], 1, #rec[list], 1, {})
  xs[#xs + 1] = res.latency_s
  rec[list] = xs
  if res.contended then rec.why = res.contended end
  return true
end

--- The record's figure: {latency_s, speedup, measurements, samples,
--- flagged, latency_min_s, latency_max_s, contended}, or nil before a
--- correct measurement. The median is over the clean samples; over the
--- flagged ones, with `contended` saying why, only when there is none.
function M.figure(rec)
  local xs, contended = rec.samples, nil
  if #xs == 0 then xs, contended = rec.flagged, rec.why end
  if #xs == 0 then return nil end
  local lat = figure.median(xs)
  local base = rec.result and rec.result.baseline_latency_s
  local lo, hi = math.huge, -math.huge
  for _, x in ipairs(xs) do lo, hi = math.min(lo, x), math.max(hi, x) end
  return { latency_s = lat, speedup = base and base / lat or (rec.result and rec.result.speedup),
    measurements = #xs, samples = xs, flagged = #rec.flagged > 0 and rec.flagged or nil,
    latency_min_s = lo, latency_max_s = hi, contended = contended }
end

-- After a sample: every node of the source shows the figure, and a
-- `measure` event records it for readers of the run directory.
local function publish(ctx, rec)
  local f = M.figure(rec)
  if not f then return end
  for _, node in ipairs(rec.nodes) do
    local m = node.metrics
    for _, k in ipairs(SHOWN) do m[k] = f[k] end
  end
  local holder = rec.nodes[#rec.nodes]
  ctx:event { type = "measure", source_hash = rec.hash, node = holder and holder.id, latency_s = f.latency_s,
    speedup = f.speedup, measurements = f.measurements, samples = f.samples, flagged = f.flagged,
    latency_min_s = f.latency_min_s, latency_max_s = f.latency_max_s, contended = f.contended,
    spread = rec.result.spread, baseline_latency_s = rec.result.baseline_latency_s }
end

-- Benchmark the record's build once more (a resumed run's record has no
-- build: evaluated afresh) and add the sample.
local function remeasure(ctx, rec, files, o)
  local t0 = task_lib.now()
  local br = ctx.eval:remeasure(files, o)
  ctx.device_s = ctx.device_s + (br.wall_s or (task_lib.now() - t0))
  if br.kind == "not_evaluated" then br = ctx:_measure(files, o) end
  if add_sample(rec, br) then publish(ctx, rec) end
  return br
end

-- The evaluator's result for the record as it stands: the first
-- evaluation's verdict with the record's figure.
local function result_of(rec)
  local res = {}
  for k, v in pairs(rec.result) do res[k] = v end
  res.source_hash = rec.hash
  local f = M.figure(rec)
  if f then
    for _, k in ipairs(SHOWN) do res[k] = f[k] end
    if f.measurements + #rec.flagged > 1 then
      res.message = string.format("%s; measured %d times (same source as %s): median %.6g s, min %.6g s, max %.6g s%s",
        tostring(rec.result.message or ""), f.measurements + #rec.flagged,
        rec.nodes[1] and rec.nodes[1].id or "an earlier candidate", f.latency_s, f.latency_min_s, f.latency_max_s,
        #rec.flagged > 0 and string.format(" (%d taken under contention, not counted)", #rec.flagged) or "")
    end
  end
  return res
end

--- Evaluate files through their record: the first time for real; after
--- that (a correct kernel) a re-measurement of the same build added to the
--- record. Returns the evaluator's result with the record's figure.
function M.evaluate(ctx, files, o)
  local rec = M.record(ctx, files, o)
  return rec.lock:with(function()
    if not rec.result then
      local res = ctx:_measure(files, o)
      rec.result = res
      add_sample(rec, res)
    elseif rec.result.status == "ok" and #rec.samples + #rec.flagged > 0 and ctx.eval.remeasure then
      remeasure(ctx, rec, files, o)
    end
    return result_of(rec)
  end)
end

--- Re-measure the kernel of a node (a correct one, of this run): one more
--- benchmark of its build added to its record. Returns the figure.
function M.remeasure(ctx, node)
  local h = node.metrics and node.metrics.source_hash
  if node.status ~= "ok" or not h then return nil, "not a correct, measured candidate" end
  local files = {}
  for _, name in ipairs(node:files()) do files[name] = node:file(name) end
  local rec = M.record(ctx, files, { tune = node.kind == "tune" })
  if rec.hash ~= h then rec = ctx._records[h] or rec end
  rec.lock:with(function() remeasure(ctx, rec, files, rec.opts or {}) end)
  return M.figure(rec)
end

--- Node `n` joins its source's record (ctx:step, after the commit).
function M.joined(ctx, n)
  local rec = n.metrics and n.metrics.source_hash and ctx._records[n.metrics.source_hash]
  if rec then rec.nodes[#rec.nodes + 1] = n end
end

-- The candidates that tie with the first (figure.versus), the first
-- included, at most `max`.
local function tied_group(cands, max)
  local group = { cands[1] }
  for i = 2, #cands do
    if #group >= max then break end
    if figure.versus(cands[1].metrics, cands[i].metrics) == "tie" then group[#group + 1] = cands[i] end
  end
  return group
end

--- Settle the lead of a ranking beyond noise: `cands` (correct nodes, one
--- per source, fastest first) whose range overlaps the fastest's (up to
--- o.max = 3 of them) are re-measured interleaved, round after round
--- (A B C A B C ...: a drift of the machine hits each alike), for at most
--- o.rounds = 3 rounds, stopping once the fastest stands apart (never for
--- interpret-mode timings, which are no kernel timings). Returns the
--- candidates ranked again, the ids still tied with the first and the
--- rounds spent.
function M.settle(ctx, cands, o)
  o = o or {}
  local rounds, max = o.rounds or 3, o.max or 3
  local function rank()
    table.sort(cands, function(a, b)
      if a.metrics.latency_s ~= b.metrics.latency_s then return a.metrics.latency_s < b.metrics.latency_s end
      return a.id < b.id
    end)
  end
  rank()
  -- an interpreter's speed (Pallas in interpret mode) is no kernel timing: nothing to settle
  if cands[1] and cands[1].metrics.timing_kind == "interpret" then return cands, {}, 0 end
  local group = #cands > 1 and tied_group(cands, max) or { cands[1] }
  local round = 0
  while #group > 1 and round < rounds and ctx.eval and ctx.eval.remeasure do
    round = round + 1
    for _, n in ipairs(group) do M.remeasure(ctx, n) end
    rank()
    group = tied_group(cands, max)
  end
  local ties = {}
  for i = 2, #group do ties[#ties + 1] = group[i].id end
  return cands, ties, round
end

return M
