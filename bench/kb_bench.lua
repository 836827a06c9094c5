-- Knowledge-base benchmark: time to index the shipped corpus (what every
-- run pays at start-up), the cost of retrieve.passages with its staleness
-- check, and indexing plus query latency on a generated synthetic corpus
-- (default 10 MB of markdown with headings, code fences and identifiers).
-- Run: build/mkengine script bench/kb_bench.lua [MEGABYTES]
local kb = require "mk.kb"
local fs = require "mk.fs"
local task = require "mk.services.task"
local home = require "mk.home"
local retrieve = require "mk.services.retrieve"
local stats = dofile((arg[0]:match("^(.*)/") or ".") .. "/lib/stats.lua")

local megabytes = tonumber(arg[1]) or 10

local function peak_rss_mb()
  local f = io.open("/proc/self/status")
  if not f then return -1 end
  local s = f:read("a")
  f:close()
  return tonumber(s:match("VmHWM:%s*(%d+)")) / 1024
end

-- Latency (s) of each query, run `reps` times each.
local function query_latency(ix, queries, reps, k)
  local times = {}
  for _ = 1, reps do
    for _, q in ipairs(queries) do
      local t0 = task.now()
      ix:search(q, k)
      times[#times + 1] = task.now() - t0
    end
  end
  return times
end

local function latency(times)
  return string.format("%s, p95 %.3f ms", stats.fmt(times, 1e3, "ms"), stats.quantile(times, 0.95) * 1e3)
end

local queries = {
  "block shape must be divisible by 8 and 128",
  "INTERNAL: Mosaic failed to compile TPU kernel: unsupported shape cast",
  "RESOURCE_EXHAUSTED: Ran out of memory in memory space vmem",
  "pltpu.PrefetchScalarGridSpec",
  "reduction axis arbitrary accumulator pl.when",
  "vectorise reduction restrict openmp",
  "roofline v6e bandwidth bound",
  "emit_pipeline double buffering",
}

local machine = stats.machine()
-- 1. the shipped corpus
local kbdir = home.path("kb")
local opens, cpu = {}, {}
local ix
for i = 1, 20 do
  local t0, c0 = task.now(), os.clock()
  if ix then ix:close() end
  ix = assert(kb.open { dirs = { kbdir }, skip = { "learned" } })
  opens[i], cpu[i] = task.now() - t0, os.clock() - c0
end
local s = ix:stats()
print(string.format("shipped corpus: %d files, %d bytes, %d chunks, %d terms", s.files, s.bytes, s.chunks, s.terms))
print(string.format("  kb.open: wall %s, CPU %s", stats.fmt(opens, 1e3, "ms"), stats.fmt(cpu, 1e3, "ms")))
print("  search k=5: " .. latency(query_latency(ix, queries, 200, 5)))
local t0 = task.now()
for _ = 1, 200 do ix:stale() end
print(string.format("  index:stale(): %.3f ms per check", (task.now() - t0) * 1e3 / 200))
retrieve.passages("warm the cache", { learned = false })
local rtimes = {}
for _ = 1, 50 do
  for _, q in ipairs(queries) do
    local t1 = task.now()
    retrieve.passages(q, { learned = false })
    rtimes[#rtimes + 1] = task.now() - t1
  end
end
print("  retrieve.passages (stale check + search + budget): " .. latency(rtimes))
ix:close()

-- 2. a synthetic corpus: deterministic pseudo-random prose with a Zipf-like
-- vocabulary, identifiers, headings every few paragraphs and code fences.
local seed = 12345
local function rand(m)
  seed = (seed * 1103515245 + 12345) % 2147483648
  return seed % m + 1
end
local vocab = {}
for i = 1, 20000 do
  local w = {}
  for j = 1, 3 + rand(8) do w[j] = string.char(96 + rand(26)) end
  vocab[i] = table.concat(w) .. (i % 5 == 0 and tostring(i % 97) or "")
end
local idents = { "pltpu.VMEM", "BlockSpec", "vmem_limit_bytes", "pl.program_id", "preferred_element_type",
  "jnp.float32", "emit_pipeline", "PrefetchScalarGridSpec", "make_async_copy", "dimension_semantics" }
local function word()
  local r = rand(1000)
  if r <= 5 then return idents[rand(#idents)] end
  -- skewed: small ids far more often
  local a, b = rand(20000), rand(20000)
  return vocab[math.min(a, b, rand(20000))]
end
local function paragraph(words)
  local w = {}
  for i = 1, words do w[i] = word() end
  return table.concat(w, " ") .. ".\n"
end

local dir = fs.tmpdir("mk-kb-bench")
local target = megabytes * 1024 * 1024
local written, files = 0, 0
local t1 = task.now()
while written < target do
  files = files + 1
  local parts = { "# Topic " .. files .. " " .. word() .. "\n\n" }
  local size = 0
  for sec = 1, 40 do
    parts[#parts + 1] = string.format("## Section %d %s %s\n\n", sec, word(), word())
    for _ = 1, 3 do
      local p = paragraph(40 + rand(60))
      parts[#parts + 1] = p .. "\n"
      size = size + #p
    end
    if sec % 4 == 0 then parts[#parts + 1] = "```python\n# not a heading " .. word() .. "\nx = " .. word() .. "\n```\n\n" end
  end
  local text = table.concat(parts)
  assert(fs.write(string.format("%s/f%05d.md", dir, files), text, { atomic = false }))
  written = written + #text
end
print(string.format("synthetic corpus: %d files, %.1f MB (generated in %.2f s)", files, written / 1048576,
  task.now() - t1))

local builds, bcpu = {}, {}
for i = 1, 3 do
  local t2, c2 = task.now(), os.clock()
  if ix then ix:close() end
  ix = assert(kb.open { dirs = { dir } })
  builds[i], bcpu[i] = task.now() - t2, os.clock() - c2
end
s = ix:stats()
print(string.format("  kb.open: wall %s, CPU %s (%.1f MB/s wall); %d chunks, %d terms, %d tokens",
  stats.fmt(builds, 1, "s"), stats.fmt(bcpu, 1, "s"), written / 1048576 / stats.median(builds), s.chunks, s.terms,
  s.tokens))
print("  search k=5: " .. latency(query_latency(ix, queries, 20, 5)))
t0 = task.now()
ix:stale()
print(string.format("  index:stale(): %.2f ms", (task.now() - t0) * 1e3))
print(string.format("peak RSS %.1f MB", peak_rss_mb()))
ix:close()
fs.rm_rf(dir)
stats.report(machine)
