--- targets/c/task.lua: a C task: its task.lua read (bounded, as code),
--- checked and completed with defaults; the arguments' C types and byte
--- sizes, the size symbols and formulas, and the entry's signature.
--- Adds detect, load and signature to the target; returns the helpers the
--- other files use on arguments and sizes.
local _, M = ...
local fs = require("mk.fs")
local guard = require("mk.services.guard")

local CTYPE = { float32 = "float", float64 = "double", int32 = "int32_t", int64 = "int64_t" }
local SHORT = { float32 = "f32", float64 = "f64", int32 = "i32", int64 = "i64" }
local SIZE = { float32 = 4, float64 = 8, int32 = 4, int64 = 8 }

local function bad(msg) return nil, { kind = "bad_task", message = msg } end

-- Evaluate a size formula: a Lua expression over the size symbols, or a function.
local function formula(spec, sizes)
  if spec == nil then return nil end
  if type(spec) == "function" then return spec(sizes) end
  if type(spec) == "number" then return spec end
  local env = setmetatable({}, { __index = function(_, k) return sizes[k] or math[k] end })
  local f, err = load("return " .. spec, "=formula", "t", env)
  if not f then error(err, 0) end
  return f()
end

local function dims_of(arg, sizes)
  local n, dims = 1, {}
  for _, d in ipairs(arg.shape) do
    local v = type(d) == "number" and d or sizes[d]
    if type(v) ~= "number" then return nil, "unknown size symbol '" .. tostring(d) .. "'" end
    n = n * v
    dims[#dims + 1] = math.tointeger(v) or v
  end
  return n, dims
end

local function scalar_value(arg, sizes)
  local v = arg.value
  if v == nil then v = arg.name end
  if type(v) == "string" then v = sizes[v] end
  return v
end

-- Size symbols in the order they appear in the arguments (for case ids).
local function size_label(task, sizes)
  local seen, parts = {}, {}
  for _, a in ipairs(task.args) do
    for _, d in ipairs(a.shape or {}) do
      if type(d) == "string" and not seen[d] then
        seen[d] = true
        parts[#parts + 1] = tostring(math.tointeger(sizes[d]) or sizes[d])
      end
    end
  end
  return table.concat(parts, "x")
end

local function set_bytes(task, sizes)
  local b = 0
  for _, a in ipairs(task.args) do
    if a.shape then b = b + dims_of(a, sizes) * SIZE[a.dtype] end
  end
  return b
end

local function shape_text(a, sizes)
  local _, dims = dims_of(a, sizes)
  local parts = {}
  for i, d in ipairs(dims) do parts[i] = tostring(d) end
  return table.concat(parts, "x")
end

local function validate(t, dir)
  local where = dir .. "/task.lua: "
  if type(t) ~= "table" then return bad(where .. "must return a table") end
  if type(t.name) ~= "string" or not t.name:match("^[%w_.%-]+$") then return bad(where .. "'name' must be a short identifier") end
  if type(t.description) ~= "string" then return bad(where .. "'description' must be a string") end
  t.entry = t.entry or "kernel"
  if type(t.entry) ~= "string" or not t.entry:match("^[%a_][%w_]*$") then return bad(where .. "'entry' must be a C identifier") end
  if type(t.args) ~= "table" or #t.args == 0 then return bad(where .. "'args' must be a non-empty list") end
  if type(t.sizes) ~= "table" then return bad(where .. "'sizes' (the benchmark size) is required") end
  local names = {}
  for i, a in ipairs(t.args) do
    local w = where .. "args[" .. i .. "]: "
    if type(a) ~= "table" or type(a.name) ~= "string" or not a.name:match("^[%a_][%w_]*$") then
      return bad(w .. "needs a C identifier 'name'")
    end
    if names[a.name] then return bad(w .. "duplicate name " .. a.name) end
    names[a.name] = true
    if a.kind == "int" or a.kind == "float" then
      local v = scalar_value(a, t.sizes)
      if type(v) ~= "number" then return bad(w .. "scalar '" .. a.name .. "' has no value (add value= or a size symbol)") end
    elseif a.kind == "in" or a.kind == "out" or a.kind == "inout" then
      a.dtype = a.dtype or "float32"
      if not CTYPE[a.dtype] then return bad(w .. "unknown dtype " .. tostring(a.dtype)) end
      if type(a.shape) ~= "table" or #a.shape == 0 then return bad(w .. "arrays need a 'shape'") end
      local n, err = dims_of(a, t.sizes)
      if not n then return bad(w .. err) end
      local init = a.init or "uniform"
      if type(init) == "string" then init = { init } end
      if init[1] ~= "uniform" and init[1] ~= "normal" then return bad(w .. "init must be uniform or normal") end
      if init[1] == "uniform" then a.init = { "uniform", init[2] or -1, init[3] or 1 }
      else a.init = { "normal", init[2] or 0, init[3] or 1 } end
    else
      return bad(w .. "kind must be in, out, inout, int or float")
    end
  end
  local has_out = false
  for _, a in ipairs(t.args) do if a.kind == "out" or a.kind == "inout" then has_out = true end end
  if not has_out then return bad(where .. "no out/inout argument: nothing to check") end
  t.test_sizes = t.test_sizes or { t.sizes }
  t.heldout_sizes = t.heldout_sizes or t.test_sizes
  for _, list in ipairs { t.test_sizes, t.heldout_sizes } do
    for _, s in ipairs(list) do
      for _, a in ipairs(t.args) do
        if a.shape then
          local n, err = dims_of(a, s)
          if not n then return bad(where .. "test size: " .. err) end
        end
      end
    end
  end
  t.seeds = t.seeds or { 1, 2 }
  t.heldout_seeds = t.heldout_seeds or { 1001, 1002 }
  t.bench_seed = t.bench_seed or 7
  t.tolerance = t.tolerance or {}
  t.tolerance.atol = t.tolerance.atol or 1e-4
  t.tolerance.rtol = t.tolerance.rtol or 1e-4
  t.timeout = t.timeout or 60
  t.cflags = t.cflags or {}
  local okf, flops = pcall(formula, t.flops, t.sizes)
  local okb, bytes = pcall(formula, t.bytes, t.sizes)
  if not okf then return bad(where .. "flops: " .. tostring(flops)) end
  if not okb then return bad(where .. "bytes: " .. tostring(bytes)) end
  t.flops_spec, t.bytes_spec = t.flops, t.bytes
  t.flops, t.bytes = flops, bytes
  return t
end

--- The C signature of the task's entry, as compiled and shown to models.
function M.signature(task)
  local parts = {}
  for _, a in ipairs(task.args) do
    if a.kind == "int" then parts[#parts + 1] = "int " .. a.name
    elseif a.kind == "float" then parts[#parts + 1] = "float " .. a.name
    elseif a.kind == "in" then parts[#parts + 1] = "const " .. CTYPE[a.dtype] .. " *" .. a.name
    else parts[#parts + 1] = CTYPE[a.dtype] .. " *" .. a.name end
  end
  return "void " .. task.entry .. "(" .. table.concat(parts, ", ") .. ")"
end

function M.detect(dir)
  return fs.exists(dir .. "/task.lua") and fs.exists(dir .. "/reference.c")
end

--- Load a C task directory: task | nil, {kind = "bad_task", message}.
function M.load(dir)
  local src = fs.read(dir .. "/task.lua")
  if not src then return bad("cannot read " .. dir .. "/task.lua") end
  local env = { math = math, string = string, table = table, ipairs = ipairs, pairs = pairs, tostring = tostring }
  local chunk, err = load(src, "@" .. dir .. "/task.lua", "t", env)
  if not chunk then return bad(err) end
  -- the file is code: bounded in CPU time and memory (an endless loop or a
  -- runaway table must end in a clear error, not a hung engine)
  local ok, t = guard.call(dir .. "/task.lua", nil, chunk)
  if not ok then return bad(type(t) == "table" and t.message or (dir .. "/task.lua: " .. tostring(t))) end
  local okv, task, verr = guard.call(dir .. "/task.lua", nil, validate, t, dir)
  if not okv then return bad(type(task) == "table" and task.message or tostring(task)) end
  if not task then return nil, verr end
  local ref = fs.read(dir .. "/reference.c")
  if not ref then return bad("cannot read " .. dir .. "/reference.c") end
  task.target = "c"
  task.dir = dir
  task.candidate_file = "kernel.c"
  task.reference_file = dir .. "/reference.c"
  task.reference = ref
  task.signature = M.signature(task)
  task.language = "c"
  return task
end

return { CTYPE = CTYPE, SHORT = SHORT, formula = formula, dims_of = dims_of, scalar_value = scalar_value,
  size_label = size_label, set_bytes = set_bytes, shape_text = shape_text }
