--- What the sub-agents tell a model about the simulated target: a kernel is
--- a state file (docs/simulator.md), not code. The simulated model reads
--- and writes these files; a real model told these rules could too.
return {
  target_desc = "a simulated accelerator (mkengine's sim target), whose kernels are state files naming the "
    .. "optimisations they apply, not code",
  lang = "sim",
  rules = "Rules: answer with a complete kernel.sim state file: a line `kernel <task name>`, a line `opts` "
    .. "listing the optimisations the kernel applies (names from the optimisation menu of docs/simulator.md), "
    .. "a line `block <size>`; never write a `defects` line yourself (the device finds defects) and never a "
    .. "`reference` line.",
  tune_syntax = "# mk:tune block = [128, 256, 512, 1024]   (then the default: block 256)",
  plan_template = "Settle: the one optimisation of the menu the next version applies (its name), why the "
    .. "profile points to it, and what it could break (compilation, the masking of partial blocks).",
  skeleton = "kernel TASK\nopts tile_grid vmem_accumulate\nblock 256",
  tune_notes = "The autotuner compiles the kernel once per value of `block` and keeps the fastest.",
}
