--- targets/c/check.lua: mkc-check (check.c), which runs outside the
--- sandbox and never loads candidate code: its plan's opening lines (the
--- manifest and seal of the frozen suite), running it, and the comparison
--- of a runner's outputs with the frozen expected ones.
local need, M = ...
local proc = require("mk.proc")
local cjson = require("cjson.safe")
local task_lib = require("mk.services.task")
local task_mod = need "task"
local SHORT, dims_of, shape_text = task_mod.SHORT, task_mod.dims_of, task_mod.shape_text

local C = {}

-- The checker's opening lines: the manifest (its hash as frozen), the seal
-- of the files' identities when the suite has one, the root.
function C.manifest_lines(tests_dir, meta)
  local lines = { "manifest " .. tests_dir .. "/manifest.sha256 " .. meta.manifest_sha }
  if meta.seal_sha then lines[#lines + 1] = "seal " .. tests_dir .. "/manifest.seal " .. meta.seal_sha end
  lines[#lines + 1] = "root " .. tests_dir
  return lines
end
local manifest_lines = C.manifest_lines

-- Run mkc-check on `plan`: its answer | nil, why.
-- acct (optional): its check_s grows by the checker's wall time; cpu
-- (optional): its s by the checker's CPU seconds.
function C.run(plan, acct, cpu)
  local b = M.binaries()
  local t0 = task_lib.now()
  local r, err = proc.run { argv = { b.check }, stdin = plan, timeout = 600, max_output = 64 << 20 }
  if acct then acct.check_s = (acct.check_s or 0) + (task_lib.now() - t0) end
  if not r then return nil, "cannot run mkc-check: " .. tostring(err and err.message) end
  if cpu then cpu.s = cpu.s + (r.cpu_s or 0) end
  local j = cjson.decode(r.stdout or "")
  if not j then return nil, "mkc-check failed: " .. (r.stderr or "") .. (r.stdout or ""):sub(1, 300) end
  return j
end
local checker = C.run

-- Compare the outputs `outs` (in the runner's blob) with the expected ones.
function C.outputs(task, tests_dir, meta, blob, outs, cases_by_id, acct, cpu)
  local lines = manifest_lines(tests_dir, meta)
  lines[#lines + 1] = "blob " .. blob
  local args_by_name = {}
  for _, a in ipairs(task.args) do args_by_name[a.name] = a end
  for _, o in ipairs(outs) do
    local a = args_by_name[o.name]
    local c = cases_by_id[o.case]
    lines[#lines + 1] = string.format("cmp %s %s %s %d %d %s expected/%s/%s.bin %.9g %.9g %s", o.case, o.name,
      SHORT[a.dtype], math.tointeger(dims_of(a, c.sizes)), math.tointeger(o.offset), o.hash, o.case, o.name,
      task.tolerance.atol, task.tolerance.rtol, shape_text(a, c.sizes))
  end
  return checker(table.concat(lines, "\n") .. "\n", acct, cpu)
end

return C
