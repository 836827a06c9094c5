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

--- `mkengine eval TASK kernel.py --json --no-profile --fresh` of the source
--- `src` on this CPU (TPU interpret mode, a cache of its own): the decoded
--- object (the test fails when it does not exit 0). `t`: the test library.
function M.eval_json(t, task, src)
  local fs = require "mk.fs"
  local mk = fs.realpath((os.getenv("MKENGINE_BUILD") or "build") .. "/mkengine")
  local d = t.tmpdir("mk-eval-json-")
  assert(fs.write(d .. "/kernel.py", src))
  local code, out = t.sh("MKENGINE_CACHE=" .. d .. "/cache JAX_PLATFORMS=cpu MK_PALLAS_POISON_MB=1 " .. mk ..
    " eval " .. task .. " " .. d .. "/kernel.py --json --no-profile --fresh")
  fs.rm_rf(d)
  t.eq(code, 0, out)
  return require("cjson").decode(out:match("([^\n]+)\n*$"))
end

return M
