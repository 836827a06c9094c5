-- The Pallas target's end-to-end tests on this CPU: TPU interpret mode with
-- real JAX (also on a host with an accelerator; scripts/device_check.sh
-- covers native runs), and a small poison fill between calls.
local M = {}

--- Point `pallas` (the target module) at the CPU: true, or nil, why when
--- its interpreter cannot import JAX.
function M.setup(pallas)
  local py = os.getenv("MK_PYTHON") or pallas.default_python()
  if os.execute(py .. " -c 'import jax' >/dev/null 2>&1") ~= true then return nil, "JAX is not importable by " .. py end
  pallas.env = { MK_PALLAS_POISON_MB = "1", JAX_PLATFORMS = "cpu" }
  return true
end

function M.teardown(pallas)
  pallas.env = nil
end

return M
