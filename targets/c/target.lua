--- targets/c/target.lua: the C target. A candidate is one C file defining the task's
--- entry; it is compiled (sandboxed) into a shared object together with a
--- generated glue function, and run by targets/c/mkc-run inside the sandbox
--- on frozen inputs; targets/c/mkc-check compares its outputs with the frozen
--- expected outputs in a separate, unsandboxed process. See
--- docs/task-format.md and docs/api/targets.md.
---
--- This file is the interface module; each phase is a file of this folder
--- that adds its functions to the module (mk.eval.folder runs each once,
--- with `need` and the module):
---   task.lua     detect, load, signature: a task.lua read and checked
---   screen.lua   screen, load_time_code: what a candidate may not do
---   compile.lua  compile, tunables, machine_failure
---   freeze.lua   freeze: the reference's frozen, sealed suite
---   test.lua     test: a build on the search or held-out cases
---   bench.lua    bench, baseline: timed at the benchmark size
---   probes.lua   probe_prepare, probe_discard: fresh-input probes
---   profile.lua  profile, peaks: rates against the machine's roofs
---   machine.lua  facts, suite_facts, machine_key, suite_cache
--- and what they share: runner.lua (the processes: mkc-run, the compiler,
--- binaries, result tables), check.lua (mkc-check), suite.lua (a frozen
--- suite's cases and their plan lines), contention.lua (whether a
--- benchmark was timed while something else held the CPU).
local _, dir = ...
local util = require("mk.services.util")

local M = { name = "c" }

local need = require("mk.eval.folder").loader(dir, M)
for _, phase in ipairs { "task", "screen", "compile", "freeze", "test", "bench", "probes", "profile", "machine" } do
  need(phase)
end

M._internal = { formula = need("task").formula, case_list = need("suite").case_list,
  classify = need("runner").classify, sh_quote = util.sh_quote, contention = need("contention") }

return M
