--- targets/pallas/load.lua: detecting and loading a Pallas task in any of
--- its three formats (JAXBench baseline.py, MaxKernel reference.py +
--- kernel_task.yaml, a task.lua with target = "pallas"); the harness's
--- `load` step reads the reference.
local _, M, call = ...
local fs = require "mk.fs"
local harness = call.harness

local function isfile(p)
  local st = fs.stat(p)
  return st ~= nil and (st.type == "file" or (st.type == "link" and not fs.isdir(p)))
end

-- Evaluate a task.lua with only math and string visible.
local function read_task_lua(path)
  local src, err = fs.read(path)
  if not src then return nil, err end
  local env = { math = math, string = string, table = table, ipairs = ipairs, pairs = pairs, tonumber = tonumber }
  local chunk, perr = load(src, "@" .. path, "t", env)
  if not chunk then return nil, perr end
  local ok, v = require("mk.services.guard").call(path, nil, chunk) -- bounded: CPU time and memory
  if not ok then return nil, type(v) == "table" and v.message or tostring(v) end
  if type(v) ~= "table" then return nil, path .. " must return a table" end
  return v
end

--- Whether `dir` holds a Pallas task: JAXBench baseline.py, MaxKernel
--- reference.py + kernel_task.yaml, or a task.lua with target = "pallas".
---@param dir string
---@return boolean
function M.detect(dir)
  if type(dir) ~= "string" then error("pallas.detect: dir must be a string", 2) end
  if isfile(dir .. "/baseline.py") then return true end
  if isfile(dir .. "/reference.py") and isfile(dir .. "/kernel_task.yaml") then return true end
  if isfile(dir .. "/task.lua") then
    local t = read_task_lua(dir .. "/task.lua")
    return t ~= nil and t.target == "pallas"
  end
  return false
end

--- Load a Pallas task (any of the three formats) into a task table.
---@param dir string task directory
---@return table|nil task
---@return table|nil err {kind = "bad_task", message}
function M.load(dir)
  if type(dir) ~= "string" then error("pallas.load: dir must be a string", 2) end
  local abs = fs.realpath(dir)
  if not abs or not fs.isdir(abs) then
    return nil, { kind = "bad_task", message = "not a directory: " .. dir }
  end
  local spec = {}
  if isfile(abs .. "/task.lua") and not isfile(abs .. "/baseline.py") and not isfile(abs .. "/kernel_task.yaml") then
    local t, err = read_task_lua(abs .. "/task.lua")
    if not t then return nil, { kind = "bad_task", message = "task.lua: " .. tostring(err) } end
    if t.target ~= "pallas" then
      return nil, { kind = "bad_task", message = abs .. "/task.lua: target is not \"pallas\"" }
    end
    spec = t
    if spec.chip ~= nil and not M.chip_kind(spec.chip) then
      return nil, { kind = "bad_task", message = abs .. "/task.lua: chip: " .. select(2, M.chip_kind(spec.chip)) }
    end
  end
  local args = { "--task", abs }
  if spec.tolerance then
    if spec.tolerance.atol then args[#args + 1] = "--atol"; args[#args + 1] = string.format("%.17g", spec.tolerance.atol) end
    if spec.tolerance.rtol then args[#args + 1] = "--rtol"; args[#args + 1] = string.format("%.17g", spec.tolerance.rtol) end
  end
  if spec.name then args[#args + 1] = "--name"; args[#args + 1] = spec.name end
  if spec.config_index then args[#args + 1] = "--config-index"; args[#args + 1] = spec.config_index end
  local r = harness("load", args, { timeout = M.defaults.load_timeout })
  if r.status ~= "ok" then
    return nil, { kind = "bad_task", message = r.message ~= "" and r.message or ("cannot load " .. abs) }
  end
  local h = r.task
  local task = {
    name = h.name,
    target = "pallas",
    format = h.format,
    description = spec.description or h.description,
    dir = abs,
    candidate_file = "kernel.py",
    reference = h.reference,
    reference_file = h.reference_file,
    signature = h.signature,
    entry = h.entry,
    entry_params = h.entry_params,
    tolerance = { atol = h.tolerance.atol, rtol = h.tolerance.rtol },
    config = h.config,
    test_configs = h.test_configs,
    has_get_flops = h.has_get_flops,
    seeds = spec.seeds or M.defaults.seeds,
    heldout_seeds = spec.heldout_seeds or M.defaults.heldout_seeds,
    timeout = spec.timeout or M.defaults.timeout,
    dtype = spec.dtype,
    interpret = spec.interpret,
    test_scale = spec.test_scale,
    chip = spec.chip, -- the TPU a kernel sees in interpret mode (M.chip_kind)
    plain_ok = spec.plain_ok, -- candidates may be plain JAX (M.not_a_kernel)
    python = r.python,
  }
  task.prompt_notes = string.format(
    "Write %s in kernel.py using jax.experimental.pallas (pl.pallas_call); it must define `%s` with the " ..
    "same arguments and outputs as the reference (imports: see the rules). " ..
    "Declare tunables as `# mk:tune name = [v1, v2]` with a module-level default.",
    task.name, task.signature)
  return task
end
