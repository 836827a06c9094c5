--- mk.services.sim.kernel: the file a simulated kernel is. A candidate of
--- the sim target (`kernel.sim`) is a small text file holding the state of
--- the kernel it stands for: which optimisations it applies, which defects
--- it has, its block size and its tunables. The simulated device
--- (targets/sim) derives verdicts, latencies and profiles from it; the
--- simulated model (mk.services.llm.providers.sim) reads it from the
--- prompts and writes the next one. docs/simulator.md has the format:
---
---   # comment lines start with '#'
---   kernel 6p_Paged_Attention        the task (required, first field)
---   reference                        only in the reference: the XLA program
---   draw 5f1c2a9e                    the sample (two samples: two files)
---   size 2150                        tokens of the real kernel it stands for
---   opts tile_grid double_buffer*    optimisations applied ('*': botched)
---   defects compile:vmem incorrect:mask
---   # mk:tune block = [128, 256, 512]
---   block 256                        the block size in use
---
--- Also the catalogues both sides share: the optimisations (OPTS, the sim
--- target's direction menu) and the defects with the messages the device
--- reports for them (DEFECTS).
local M = {}

--- The optimisations a simulated kernel can apply, in menu order. `cx` is
--- how complex the change is (it scales the odds of breaking the kernel).
M.OPTS = {
  { name = "tile_grid", cx = 1, text = "Tile the computation with a grid and BlockSpecs whose last two block dims "
    .. "are multiples of 8 and 128" },
  { name = "fuse_epilogue", cx = 1, text = "Fuse the elementwise epilogue (bias, activation, scaling, residual) "
    .. "into the kernel instead of running it in XLA afterwards" },
  { name = "fuse_chain", cx = 2, text = "Fuse the whole chain of operations into one kernel so intermediates "
    .. "never go back to HBM" },
  { name = "vmem_accumulate", cx = 1, text = "Accumulate the reduction in a float32 VMEM scratch buffer, "
    .. "reduction axis last in the grid and marked arbitrary" },
  { name = "online_softmax", cx = 2, text = "Compute softmax / normalisation online in one pass over the blocks "
    .. "(running max and sum)" },
  { name = "double_buffer", cx = 3, text = "Double-buffer manual DMAs (memory_space=pl.ANY, make_async_copy) "
    .. "to overlap copies with compute" },
  { name = "scalar_prefetch", cx = 2, text = "Use scalar prefetch (PrefetchScalarGridSpec) for the indices or "
    .. "page tables that drive the index maps" },
  { name = "skip_blocks", cx = 2, text = "Skip fully masked or empty blocks (causal, sparse, padded) instead "
    .. "of computing them" },
  { name = "grid_order", cx = 1, text = "Reorder the grid so a block index repeats on consecutive steps and "
    .. "its copy is skipped" },
  { name = "parallel_axes", cx = 1, text = "Mark independent grid axes parallel in dimension_semantics so they "
    .. "split across cores" },
  { name = "bf16_io", cx = 1, text = "Keep inputs in bf16 and accumulate in f32 with "
    .. "preferred_element_type=jnp.float32" },
  { name = "big_blocks", cx = 1, text = "Increase the block size so each grid step does more work and per-step "
    .. "overhead is amortised" },
  { name = "emit_pipeline", cx = 3, text = "Use emit_pipeline for a nested pipeline over an inner dimension "
    .. "that does not fit in VMEM" },
  { name = "chunked_scan", cx = 3, text = "Compute the recurrence as a chunked scan: dense matmuls inside a "
    .. "chunk, a carried state between chunks" },
  { name = "group_tiles", cx = 2, text = "Group the ragged rows (tokens per expert, sequences per page) into "
    .. "tiles so every grid step does full MXU work" },
  { name = "cost_estimate", cx = 1, text = "Pass a CostEstimate to pallas_call so XLA can schedule around "
    .. "the kernel" },
}
M.OPT = {}
for i, o in ipairs(M.OPTS) do
  o.index = i
  M.OPT[o.name] = o
end

--- The defects a simulated kernel can have: `class` is what the device
--- does with it (compile: compile_error; crash: crash; incorrect: wrong on
--- the search tests; heldout: right on the search tests, wrong on the
--- held-out ones); `msg` what it reports.
M.DEFECTS = {
  block_shape = { class = "compile", msg = "ValueError: the block shape (8, 96) of in_specs[1] is not supported: "
    .. "the last two block dimensions must be divisible by 8 and 128 respectively, or equal the array's" },
  mosaic = { class = "compile", msg = "INTERNAL: Mosaic failed to compile TPU kernel: unsupported shape cast "
    .. "vector<8x96xf32> -> vector<768xf32> in the kernel body" },
  vmem = { class = "compile", msg = "RESOURCE_EXHAUSTED: Ran out of memory in memory space vmem: the blocks "
    .. "and scratch need 41.6M of the scoped 32.0M limit" },
  index_map = { class = "compile", msg = "ValueError: index_map of in_specs[2] returns 2 values for a block "
    .. "of rank 3" },
  lowering = { class = "compile", msg = "NotImplementedError: unsupported primitive in the Pallas TPU "
    .. "lowering: reduce over a non-minor axis of a vector" },
  api = { class = "compile", msg = "AttributeError: module 'jax.experimental.pallas.tpu' has no attribute "
    .. "'TPUCompilerParams'" },
  oob = { class = "crash", msg = "Out-of-bounds block index (0, 9) for input \"k_ref\": the grid reads past "
    .. "the end of the array" },
  mask = { class = "incorrect", msg = "mismatch: 3.1 % of the elements outside the tolerance; worst at "
    .. "[7, 1023]: got 0.4121, want 0.3787 (the ragged last block)" },
  accum = { class = "incorrect", msg = "mismatch: 61 % of the elements outside the tolerance; max abs "
    .. "error 0.093 at [2, 15, 88]" },
  init = { class = "incorrect", msg = "NaN in 12.5 % of the output (first at [0, 0, 128])" },
  race = { class = "incorrect", msg = "the outputs differ between two calls with the same inputs (max "
    .. "difference 0.31)" },
  ragged = { class = "heldout", msg = "mismatch on a held-out shape: 0.8 % of the elements outside the "
    .. "tolerance (the last, partial block)" },
}
M.CLASSES = { compile = {}, crash = {}, incorrect = {}, heldout = {} }
for name, d in pairs(M.DEFECTS) do
  d.name = name
  table.insert(M.CLASSES[d.class], name)
end
for _, list in pairs(M.CLASSES) do table.sort(list) end

--- The block sizes a kernel may use (a tunable's values come from here).
M.BLOCKS = { 128, 256, 512, 1024, 2048 }

local function words(s)
  local out = {}
  for w in s:gmatch("%S+") do out[#out + 1] = w end
  return out
end

local function bad(lineno, msg) return nil, string.format("kernel.sim line %d: %s", lineno, msg) end

-- One line of a state file into `st`; nil, message for a line the format
-- does not have.
local function read_line(st, line, lineno)
  local key, rest = line:match("^(%a+)%s*(.-)%s*$")
  if not key then return bad(lineno, "cannot read '" .. line:sub(1, 60) .. "'") end
  if key == "kernel" then
    if rest == "" then return bad(lineno, "kernel needs the task's name") end
    st.task = rest
  elseif key == "reference" then
    st.reference = true
  elseif key == "draw" or key == "size" or key == "block" then
    local v = key == "draw" and rest or math.tointeger(tonumber(rest))
    if v == nil or v == "" then return bad(lineno, key .. " needs a value") end
    st[key] = v
  elseif key == "opts" then
    for _, w in ipairs(words(rest)) do
      local name, star = w:match("^([%w_]+)(%*?)$")
      if not name then return bad(lineno, "bad optimisation name '" .. w .. "'") end
      st.opts[#st.opts + 1] = { name = name, botched = star == "*" }
    end
  elseif key == "defects" then
    for _, w in ipairs(words(rest)) do
      local class, name = w:match("^(%a+):([%w_]+)$")
      local d = name and M.DEFECTS[name]
      if not d or d.class ~= class then return bad(lineno, "unknown defect '" .. w .. "'") end
      st.defects[#st.defects + 1] = name
    end
  else
    return bad(lineno, "unknown field '" .. key .. "'")
  end
  return true
end

--- Read a state file: the state {task, reference, draw, size, opts = {{name,
--- botched}}, defects = {names}, block, tunables = {{name, values}}} or
--- nil, message naming the line (the device reports it as a compile error).
---@param text string
---@return table|nil state
---@return string|nil err
local parsed = setmetatable({}, { __mode = "v" }) -- text -> state: a prompt shows a kernel many times

local function parse(text)
  local st, lineno = { opts = {}, defects = {}, tunables = {} }, 0
  for line in (text .. "\n"):gmatch("([^\n]*)\n") do
    lineno = lineno + 1
    local tname, vals = line:match("^%s*#%s*mk:tune%s+([%a_][%w_]*)%s*=%s*%[(.-)%]%s*$")
    if tname then
      local values = {}
      for v in vals:gmatch("[^,%s]+") do values[#values + 1] = math.tointeger(tonumber(v)) end
      if #values == 0 then return bad(lineno, "mk:tune " .. tname .. " has no values") end
      st.tunables[#st.tunables + 1] = { name = tname, values = values }
    elseif not line:match("^%s*#") and line:find("%S") then
      local ok, err = read_line(st, line:gsub("^%s+", ""), lineno)
      if not ok then return nil, err end
    end
  end
  if not st.task then return nil, "kernel.sim: no 'kernel <task>' line: not a simulated kernel" end
  return st
end

function M.parse(text)
  if type(text) ~= "string" then error("sim.kernel.parse: text must be a string", 2) end
  local hit = parsed[text]
  if hit then return M.copy(hit) end
  local st, err = parse(text)
  if st then parsed[text] = M.copy(st) end
  return st, err
end

--- Write a state as a file (the inverse of parse).
---@param st table
---@return string
function M.format(st)
  local L = { "# simulated kernel (mkengine sim target: a state file, not code; docs/simulator.md)",
    "kernel " .. st.task }
  if st.reference then L[#L + 1] = "reference" end
  if st.draw then L[#L + 1] = "draw " .. st.draw end
  if st.size then L[#L + 1] = "size " .. st.size end
  local opts = {}
  for _, o in ipairs(st.opts or {}) do opts[#opts + 1] = o.name .. (o.botched and "*" or "") end
  if #opts > 0 then L[#L + 1] = "opts " .. table.concat(opts, " ") end
  local defects = {}
  for _, d in ipairs(st.defects or {}) do defects[#defects + 1] = M.DEFECTS[d].class .. ":" .. d end
  if #defects > 0 then L[#L + 1] = "defects " .. table.concat(defects, " ") end
  for _, t in ipairs(st.tunables or {}) do
    local vs = {}
    for i, v in ipairs(t.values) do vs[i] = tostring(v) end
    L[#L + 1] = "# mk:tune " .. t.name .. " = [" .. table.concat(vs, ", ") .. "]"
  end
  if st.block then L[#L + 1] = "block " .. st.block end
  return table.concat(L, "\n") .. "\n"
end

--- A deep copy of a state (the model edits copies).
function M.copy(st)
  local c = { task = st.task, reference = st.reference, draw = st.draw, size = st.size, block = st.block,
    opts = {}, defects = {}, tunables = {} }
  for i, o in ipairs(st.opts or {}) do c.opts[i] = { name = o.name, botched = o.botched } end
  for i, d in ipairs(st.defects or {}) do c.defects[i] = d end
  for i, t in ipairs(st.tunables or {}) do c.tunables[i] = { name = t.name, values = { table.unpack(t.values) } } end
  return c
end

--- The entry of optimisation `name` in the state, or nil.
function M.applied(st, name)
  for _, o in ipairs(st.opts) do
    if o.name == name then return o end
  end
  return nil
end

--- The state's defects of one class, in file order.
function M.of_class(st, class)
  local out = {}
  for _, d in ipairs(st.defects) do
    if M.DEFECTS[d].class == class then out[#out + 1] = d end
  end
  return out
end

--- Remove the first defect called `name`; true when there was one.
function M.remove_defect(st, name)
  for i, d in ipairs(st.defects) do
    if d == name then
      table.remove(st.defects, i)
      return true
    end
  end
  return false
end

--- The sim code blocks (```sim ... ```) of a text, in order.
function M.blocks(text)
  local out = {}
  for body in (text or ""):gmatch("```sim[ \t]*\n(.-)\n?```") do out[#out + 1] = body end
  return out
end

--- The text of the section `## <heading>...` of a prompt (up to the next
--- '## ' heading), or nil.
function M.section(text, heading)
  local s = text:find("\n## " .. heading, 1, true)
  if not s and text:sub(1, 3 + #heading) == "## " .. heading then s = 0 end
  if not s then return nil end
  local body_start = text:find("\n", s + 1, true) or #text
  local head = text:sub(s + 1, body_start - 1)
  local e = text:find("\n## ", body_start, true)
  return text:sub(body_start + 1, e and e - 1 or #text), head
end

--- The state of the kernel in a prompt's section `heading`, or nil.
function M.in_section(text, heading)
  local body = M.section(text, heading)
  local block = body and M.blocks(body)[1]
  return block and M.parse(block) or nil
end

return M
