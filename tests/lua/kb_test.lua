-- Knowledge base: retrieval with known answers over the shipped corpus,
-- prompt formatting and budgets, learned entries found by a later index,
-- and the `mkengine kb` command run as a subprocess.
local t = dofile("tests/lua/lib/t.lua")
local kb = require "mk.kb"
local fs = require "mk.fs"
local retrieve = require "mk.services.retrieve"

-- Known answers are about the shipped corpus: leave out what local runs
-- may have learned into kb/learned/.
local function top(query, opts)
  local ps = assert(retrieve.passages(query, opts or { k = 3, learned = false }))
  t.ok(#ps > 0, "no passages for " .. query)
  return ps[1], ps
end

local function basename(p) return (p.file:match("[^/]+$")) end

t.test("block-shape query ranks the passage explaining the (8, 128) rule first", function()
  local p = top("block shape must be divisible by 8 and 128")
  t.eq(basename(p), "pallas-blockspec.md")
  t.contains(p.title, "Block-shape rule")
  t.contains(p.text, "divisible by 8")
  t.contains(p.text, "divisible by 128")
end)

t.test("a VMEM out-of-memory error message finds the passage with its fix", function()
  local p = top("RESOURCE_EXHAUSTED: Ran out of memory in memory space vmem while allocating on stack")
  t.ok(basename(p) == "pallas-errors.md" or basename(p) == "tpu-vmem-budget.md", "got " .. p.file)
  t.contains(p.text, "vmem_limit_bytes")
end)

t.test("a Mosaic compile error message finds the Mosaic errors section", function()
  local p = top("INTERNAL: Mosaic failed to compile TPU kernel: unsupported shape cast")
  t.eq(basename(p), "pallas-errors.md")
  t.contains(p.title, "Mosaic compile errors")
end)

t.test("an unimplemented-primitive lowering error finds its section", function()
  local p = top("NotImplementedError: Unimplemented primitive in Pallas TPU lowering: gather")
  t.contains(p.title, "Unimplemented primitive")
end)

t.test("a C link error about expf finds the compile-errors passage", function()
  local p = top("kernel.c: undefined reference to `expf'")
  t.eq(basename(p), "c-compiler-flags-and-errors.md")
  t.contains(p.text, "-lm")
end)

t.test("identifiers match exactly: PrefetchScalarGridSpec, emit_pipeline, make_async_copy", function()
  t.eq(basename(top("pltpu.PrefetchScalarGridSpec")), "pallas-scalar-prefetch.md")
  t.contains(top("emit_pipeline").title, "emit_pipeline")
  t.eq(basename(top("make_async_copy")), "tpu-memory-spaces-dma.md")
  t.contains(top("preferred_element_type").text, "preferred_element_type")
end)

t.test("identifier parts also match prose: 'prefetch scalar grid spec' finds the same file", function()
  t.eq(basename(top("prefetch scalar grid spec")), "pallas-scalar-prefetch.md")
end)

t.test("target filters shipped notes to that target's files and general ones", function()
  local function names(ps)
    local out = {}
    for i, p in ipairs(ps) do out[i] = basename(p) end
    return table.concat(out, " ")
  end
  local q = "segmentation fault alignment memory bound bandwidth roofline"
  local all = assert(retrieve.passages(q, { k = 8 }))
  t.matches(names(all), "c%-", "unfiltered results mix targets")
  t.matches(names(all), "tpu%-")
  local c = assert(retrieve.passages(q, { k = 8, target = "c" }))
  t.ok(#c > 0)
  for _, p in ipairs(c) do t.ok(basename(p):match("^c%-") or basename(p):match("^kernel%-"), "c got " .. basename(p)) end
  local pallas = assert(retrieve.passages(q, { k = 8, target = "pallas" }))
  for _, p in ipairs(pallas) do t.ok(not basename(p):match("^c%-"), "pallas got " .. basename(p)) end
  t.ok(retrieve.for_target("/elsewhere/c-notes.md", "pallas"), "user dirs serve every target")
  local home = require("mk.home")
  t.ok(retrieve.for_target(home.path("kb/learned/pallas--t.md"), "pallas"))
  t.ok(not retrieve.for_target(home.path("kb/learned/c--t.md"), "pallas"))
  t.ok(retrieve.for_target(home.path("kb/kernel-evaluation-pitfalls.md"), "c"))
  t.raises(function() retrieve.passages("x", { target = 1 }) end, "target must be a string")
end)

-- Questions a kernel engineer (or an agent) asks, each with the shipped
-- note that answers it.
local known = {
  { "block shape must be divisible by 8 and 128", "pallas-blockspec.md" },
  { "index map returns element offsets instead of block indices wrong results", "pallas-blockspec.md" },
  { "squeezed dimension None in block shape batch axis", "pallas-blockspec.md" },
  { "RESOURCE_EXHAUSTED: Ran out of memory in memory space vmem", "pallas-errors.md" },
  { "how much VMEM does my kernel use double buffering estimate", "tpu-vmem-budget.md" },
  { "INTERNAL: Mosaic failed to compile TPU kernel: unsupported shape cast", "pallas-errors.md" },
  { "NotImplementedError: Unimplemented primitive in Pallas TPU lowering", "pallas-errors.md" },
  { "TracerBoolConversionError if pl.program_id", "pallas-errors.md" },
  { "make_async_copy start wait DMA semaphore", "tpu-memory-spaces-dma.md" },
  { "memory_space=pl.ANY keep operand in HBM", "tpu-memory-spaces-dma.md" },
  { "SMEM scalar memory size", "tpu-memory-spaces-dma.md" },
  { "emit_pipeline nested pipeline inside kernel", "pallas-pipelining.md" },
  { "pl.Buffered buffer count pipeline_mode", "pallas-pipelining.md" },
  { "PrefetchScalarGridSpec num_scalar_prefetch", "pallas-scalar-prefetch.md" },
  { "block sparse matmul skip zero blocks", "pallas-scalar-prefetch.md" },
  { "accumulator scratch pl.when program_id == 0 initialise", "pallas-reductions-accumulators.md" },
  { "dimension_semantics parallel arbitrary reduction axis last", "pallas-reductions-accumulators.md" },
  { "flash attention running max online softmax", "pallas-reductions-accumulators.md" },
  { "preferred_element_type float32 bf16 matmul precision", "tpu-dtypes-precision.md" },
  { "interpret=True run on CPU without TPU", "pallas-interpret-mode.md" },
  { "InterpretParams", "pallas-interpret-mode.md" },
  { "xplane.pb ProfileData XLA Ops duration_ns", "tpu-profiling-roofline.md" },
  { "roofline ridge point v5e 197 TFLOP/s 819 GB/s", "tpu-profiling-roofline.md" },
  { "cost_estimate CostEstimate flops bytes_accessed", "tpu-profiling-roofline.md" },
  { "MXU 256x256 v6e tile size matmul", "tpu-matmul-tiling.md" },
  { "masked stores last dimension 64 lane dense", "tpu-vector-layout.md" },
  { "1-D array reshape to (N // 128, 128)", "tpu-vector-layout.md" },
  { "is Pallas faster than XLA fusion", "jax-xla-baseline.md" },
  { "speedup over 10x suspicious constant output", "kernel-evaluation-pitfalls.md" },
  { "loop not vectorized -fopt-info-vec-missed", "c-vectorisation.md" },
  { "multiple accumulators FMA latency dot product", "c-vectorisation.md" },
  { "cache blocking tile size L1 L2 matrix multiply", "c-cache-blocking.md" },
  { "#pragma omp parallel for reduction schedule", "c-openmp.md" },
  { "false sharing per thread counters", "c-openmp.md" },
  { "aligned_alloc posix_memalign __builtin_assume_aligned", "c-alignment-restrict.md" },
  { "restrict pointer aliasing", "c-alignment-restrict.md" },
  { "fuse two loops temporary array", "c-loop-transformations.md" },
  { "Kahan summation -ffast-math", "c-reductions-floating-point.md" },
  { "undefined reference to omp_get_thread_num", "c-compiler-flags-and-errors.md" },
  { "target specific option mismatch always_inline _mm256", "c-compiler-flags-and-errors.md" },
  { "structure of arrays versus array of structures", "c-memory-bandwidth-layout.md" },
  { "non-temporal streaming stores", "c-memory-bandwidth-layout.md" },
}

t.test("ranking: every known question finds its note in the top 3, at least 40 of 42 first", function()
  local first, misses = 0, {}
  for _, c in ipairs(known) do
    local ps = assert(retrieve.passages(c[1], { k = 3, learned = false }))
    local names = {}
    for i, p in ipairs(ps) do names[i] = p.name end
    if names[1] == c[2] then first = first + 1 end
    if names[1] ~= c[2] and names[2] ~= c[2] and names[3] ~= c[2] then
      misses[#misses + 1] = c[1] .. " -> " .. table.concat(names, ", ")
    end
  end
  t.eq(#known, 42)
  t.eq(#misses, 0, table.concat(misses, "; "))
  t.ok(first >= 40, "top-1 " .. first .. " of " .. #known)
end)

t.test("k and max_chars bound the passages; a cut passage is marked", function()
  local ps = assert(retrieve.passages("VMEM block shape pipeline", { k = 5, max_chars = 900 }))
  t.ok(#ps >= 1 and #ps <= 5, "count " .. #ps)
  local total = 0
  for _, p in ipairs(ps) do total = total + #p.text end
  t.ok(total <= 900, "total chars " .. total)
  local whole = assert(retrieve.passages("emit_pipeline", { k = 1 }))[1]
  t.ok(#whole.text > 250, "the emit_pipeline passage is long")
  local big = assert(retrieve.passages("emit_pipeline", { k = 1, max_chars = 250 }))
  t.eq(#big, 1)
  t.ok(big[1].truncated, "expected truncation")
  t.ok(#big[1].text <= 250, "len " .. #big[1].text)
  t.eq(big[1].text:sub(1, 100), whole.text:sub(1, 100))
  t.ok(big[1].text:match("%[%.%.%.%]$"), "cut marker")
  t.eq(#assert(retrieve.passages("VMEM", { k = 2, max_chars = 0 })), 0)
end)

t.test("empty queries return no passages; bad arguments raise", function()
  t.eq(#assert(retrieve.passages("   ")), 0)
  t.eq(#assert(retrieve.passages("zzzqqqxxx")), 0)
  t.raises(function() retrieve.passages(nil) end, "query must be a string")
  t.raises(function() retrieve.passages("x", { k = 0 }) end, "k must be")
  t.raises(function() retrieve.passages("x", { dirs = "kb" }) end, "dirs must be a list")
  t.raises(function() retrieve.learn({ { task = "t" } }) end, "plan_summary")
end)

t.test("a missing user directory is a not_found error, not a raise", function()
  local ps, err = retrieve.passages("vmem", { extra_dirs = { "/nonexistent/mk-kb" } })
  t.eq(ps, nil)
  t.eq(err.kind, "not_found")
end)

t.test("format shows numbered titles, file names and texts; refs keep what was used", function()
  local ps = assert(retrieve.passages("emit_pipeline", { k = 2 }))
  local text = retrieve.format(ps)
  t.contains(text, "[1] " .. ps[1].title)
  t.contains(text, "kb/pallas-pipelining.md")
  t.contains(text, ps[1].text)
  t.eq(retrieve.format({}), "")
  local refs = retrieve.refs(ps)
  t.eq(#refs, #ps)
  t.eq(refs[1].file, "targets/pallas/kb/pallas-pipelining.md")
  t.eq(refs[1].title, ps[1].title)
  t.eq(refs[1].text, nil)
end)

t.test("learned entries are found by a new index and by the cached one", function()
  local dir = fs.tmpdir("mk-kb-learn")
  local files = assert(retrieve.learn({
    { task = "7k_softmax_rows", target = "pallas", plan_summary = "Tile rows by 256 with an f32 running max",
      effect = "latency 1.8x faster", status = "ok", speedup = 1.8 },
    { task = "7k_softmax_rows", target = "pallas", plan_summary = "Reshape block to (bm*2, 128) inside the kernel",
      effect = "INTERNAL: Mosaic failed to compile TPU kernel: unsupported shape cast\n# line starting with hash\n```",
      status = "compile_error" },
  }, { dir = dir }))
  t.eq(#files, 1)
  t.matches(files[1], "pallas%-%-7k_softmax_rows%.md$")
  local ix = assert(kb.open { dirs = { dir } })
  t.eq(ix:stats().chunks, 2, "one chunk per entry, '#' inside the fenced effect is not a heading")
  local r = ix:search("unsupported shape cast reshape", 1)
  t.contains(r[1].title, "compile_error: Reshape block")
  t.contains(r[1].title, "Learned: 7k_softmax_rows")
  -- through retrieve: cached index, then a new entry appended in this process
  local p = top("softmax running max faster", { dirs = { dir }, k = 1 })
  t.contains(p.text, "latency 1.8x faster")
  assert(retrieve.learn({ task = "7k_softmax_rows", target = "pallas", plan_summary = "Use pl.Buffered(3) on x",
    effect = "latency 0.9x (slower)", status = "slower" }, { dir = dir }))
  p = top("pl.Buffered(3)", { dirs = { dir }, k = 1 })
  t.contains(p.title, "slower: Use pl.Buffered(3)")
  local text = assert(fs.read(files[1]))
  local _, headers = text:gsub("# Learned:", "")
  t.eq(headers, 1, "file header written once")
  fs.rm_rf(dir)
end)

t.test("identical entries of one learn call merge; repeated lessons are retrieved once", function()
  local dir = fs.tmpdir("mk-kb-dup")
  local e = { task = "dup", target = "c", plan_summary = "waldo unrolling", status = "ok", effect = "1.5x the baseline" }
  local files = assert(retrieve.learn({ e, e, e, { task = "dup", target = "c", plan_summary = "waldo tiling",
    status = "ok", effect = "1.1x the baseline" } }, { dir = dir }))
  local text = assert(fs.read(files[1]))
  t.eq(select(2, text:gsub("## ok: waldo unrolling", "")), 1)
  t.contains(text, "- occurrences: 3")
  assert(retrieve.learn({ e }, { dir = dir })) -- a later run learns the same lesson
  local ps = assert(retrieve.passages("waldo unrolling", { dirs = { dir }, k = 4 }))
  t.eq(#ps, 2, "the repeated lesson appears once, then the other entry")
  t.contains(ps[1].title, "waldo unrolling")
  t.contains(ps[2].title, "waldo tiling")
  fs.rm_rf(dir)
end)

t.test("learned = false leaves kb/learned/ and learn dirs out", function()
  local ldir = fs.tmpdir("mk-kb-nl")
  retrieve.configure { learn_dir = ldir }
  local ok, err = pcall(function()
    assert(retrieve.learn({ task = "nl", target = "c", plan_summary = "fred quux", status = "ok" }))
    t.eq(#assert(retrieve.passages("fred quux")), 1)
    t.eq(#assert(retrieve.passages("fred quux", { learned = false })), 0)
    local dirs = retrieve.default_dirs { learned = false }
    for _, d in ipairs(dirs) do t.ok(d ~= ldir, "learn dir listed") end
  end)
  retrieve.configure { learn_dir = false }
  fs.rm_rf(ldir)
  if not ok then error(err, 0) end
end)

t.test("configure(learn_dir, extra_dirs) adds those directories to the default search", function()
  local ldir, xdir = fs.tmpdir("mk-kb-ld"), fs.tmpdir("mk-kb-x")
  assert(fs.write(xdir .. "/experts.md", "# Expert notes\nquuxolotl kernels use a tiled layout.\n"))
  local before = retrieve.configure { learn_dir = ldir, extra_dirs = { xdir } }
  local ok, err = pcall(function()
    t.eq(before.learn_dir, ldir)
    assert(retrieve.learn({ task = "frobnicate", target = "c", plan_summary = "zyzzyva loop fusion", status = "ok",
      effect = "latency 1.2x faster" }))
    t.ok(fs.exists(ldir .. "/c--frobnicate.md"), "written to learn_dir")
    t.eq(basename(top("zyzzyva", { k = 3 })), "c--frobnicate.md")
    t.eq(basename(top("quuxolotl", { k = 3 })), "experts.md")
    t.eq(basename(top("block shape must be divisible by 8 and 128")), "pallas-blockspec.md")
  end)
  retrieve.configure { learn_dir = false, extra_dirs = {} }
  fs.rm_rf(ldir)
  fs.rm_rf(xdir)
  if not ok then error(err, 0) end
  t.eq(#assert(retrieve.passages("quuxolotl")), 0, "extra dir no longer searched")
end)

-- The command line, as a person runs it.
local bin = (os.getenv("MKENGINE_BUILD") or "build") .. "/mkengine"

local function run(cmd)
  local f = assert(io.popen(bin .. " " .. cmd .. " 2>&1"))
  local out = f:read("a")
  local _, _, code = f:close()
  return out, code
end

t.test("mkengine kb search puts the block-shape rule first", function()
  if not fs.exists(bin) then t.skip("no binary at " .. bin) end
  local out, code = run("kb search 'block shape must be divisible by 8 and 128'")
  t.eq(code, 0, out)
  local first = out:match("^[^\n]*\n[^\n]*")
  t.matches(first, "^1%. BlockSpec, index maps and block shapes > Block%-shape rule")
  t.contains(first, "kb/pallas-blockspec.md:")
  t.contains(out, "2. ")
  out = run("kb search -k 1 --lines 0 --no-learned 'block shape must be divisible by 8 and 128'")
  t.eq(select(2, out:gsub("\n", "")), 2, "title and file lines only: " .. out)
end)

t.test("learn falls back to $XDG_DATA_HOME/mkengine/learned when kb/learned cannot be written", function()
  if not fs.exists(bin) then t.skip("no binary at " .. bin) end
  local root = fs.tmpdir("mk-kb-home")
  local repo = assert(fs.realpath("."))
  assert(fs.mkdirs(root .. "/home/kb"))
  assert(os.execute(string.format("ln -s '%s/lua' '%s/home/lua'", repo, root)))
  assert(fs.write(root .. "/home/kb/note.md", "# Note\nsome shipped text\n"))
  assert(fs.write(root .. "/home/kb/learned", "a file where the directory should be"))
  assert(fs.write(root .. "/s.lua", [[
    local retrieve = require "mk.services.retrieve"
    local files = assert(retrieve.learn { task = "t1", target = "c", plan_summary = "grault blocking", status = "ok" })
    print(files[1])
    print(retrieve.passages("grault")[1].name)
  ]]))
  local f = assert(io.popen(string.format("MKENGINE_HOME='%s/home' XDG_DATA_HOME='%s/xdg' %s script '%s/s.lua' 2>&1",
    root, root, bin, root)))
  local out = f:read("a")
  local ok = f:close()
  fs.rm_rf(root)
  t.ok(ok, out)
  t.contains(out, root .. "/xdg/mkengine/learned/c--t1.md\n")
  t.contains(out, "\nc--t1.md\n")
end)

t.test("mkengine kb search: -k, --json, --only --kb, no match, usage errors", function()
  if not fs.exists(bin) then t.skip("no binary at " .. bin) end
  local out, code = run("kb search -k 1 --json --no-learned vmem_limit_bytes")
  t.eq(code, 0, out)
  local list = require("cjson").decode(out)
  t.eq(#list, 1)
  t.eq(list[1].file, "targets/pallas/kb/tpu-vmem-budget.md")
  local dir = fs.tmpdir("mk-kb-cli")
  assert(fs.write(dir .. "/n.md", "# Note\nplugh xyzzy\n"))
  out, code = run("kb search plugh --only --kb " .. dir)
  t.eq(code, 0, out)
  t.contains(out, "1. Note")
  t.contains(out, dir .. "/n.md:2")
  out, code = run("kb search 'block shape' --only --kb " .. dir)
  t.eq(code, 1, out)
  t.contains(out, "no passages match")
  fs.rm_rf(dir)
  out, code = run("kb")
  t.eq(code, 2, out)
  out, code = run("kb search")
  t.eq(code, 2, out)
  out, code = run("kb search x --kb /nonexistent/mk-kb")
  t.eq(code, 2)
  t.contains(out, "does not exist")
  out, code = run("kb search -k 3 --lines 0 --target c roofline bandwidth")
  t.eq(code, 0, out)
  t.ok(not out:find("kb/tpu-", 1, true), out)
  out, code = run("kb stats")
  t.eq(code, 0, out)
  t.matches(out, "^%d+ files, %d+ chunks")
end)

return t.run()
