--- targets/pallas/facts.lua: the facts the prompts state: the device, the
--- JAX versions, the chip's VMEM, SMEM and MXU figures (tpu_chips.lua) and
--- the task's shapes.
local need, M = ...
local CHIPS = need "tpu_chips" -- the TPU chips' figures

local function config_text(c)
  if type(c) ~= "table" then return tostring(c) end
  local names = {}
  for k in pairs(c) do names[#names + 1] = tostring(k) end
  table.sort(names)
  local parts = {}
  for _, k in ipairs(names) do
    local v = c[k]
    if type(v) == "table" then v = "[" .. table.concat(v, ", ") .. "]" end
    parts[#parts + 1] = k .. "=" .. tostring(math.tointeger(v) or v)
  end
  return "{" .. table.concat(parts, ", ") .. "}"
end

--- Facts for the prompts ({label, value} list): the device kind, the JAX
--- and jaxlib versions the harness reported for the baseline (measured =
--- {device = {platform, device_kind, jax_version, jaxlib_version}}; each
--- "unknown" when it could not say), the chip's VMEM, SMEM and MXU figures
--- from tpu_chips.lua with their sources, and the task's shapes.
---@param task table
---@param measured table
---@return table
function M.facts(task, measured)
  local d = type(measured) == "table" and type(measured.device) == "table" and measured.device or {}
  local kind = type(d.device_kind) == "string" and d.device_kind ~= "" and d.device_kind or nil
  local out = {
    { "device", kind and (kind .. (d.platform and (" (platform " .. d.platform .. ")") or "")) or "unknown" },
    { "JAX version", d.jax_version or "unknown" },
    { "jaxlib version", d.jaxlib_version or "unknown" },
  }
  if task.interpret then
    out[#out + 1] = { "mode", "Pallas interpret mode (runs on the CPU: correctness only, timings do not reflect a TPU)" }
  end
  local chip
  local lk = kind and kind:lower() or ""
  for _, c in ipairs(CHIPS) do
    if lk:find(c.match) or (c.alt and lk:find(c.alt, 1, true)) then chip = c break end
  end
  if chip then
    for _, f in ipairs { { "vmem", "VMEM" }, { "scoped_vmem", "scoped VMEM limit" }, { "smem", "SMEM" },
      { "mxu", "MXU" } } do
      local v = chip[f[1]]
      out[#out + 1] = { chip.name .. " " .. f[2], v[1] .. " (source: " .. v[2] .. ")" }
    end
  elseif lk:find("tpu", 1, true) then
    out[#out + 1] = { "chip figures", "not in the table (targets/pallas/tpu_chips.lua): VMEM, SMEM and MXU unknown" }
  end
  if task.config then out[#out + 1] = { "benchmark configuration (CONFIG)", config_text(task.config) } end
  local tests = {}
  for _, c in ipairs(task.test_configs or {}) do tests[#tests + 1] = config_text(c) end
  if #tests > 0 then out[#out + 1] = { "test configurations", table.concat(tests, " ") } end
  return out
end
