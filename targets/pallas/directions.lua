-- Optimisation ideas for Pallas kernels on TPU (facts from the public Pallas
-- and TPU performance guides). Beam search draws one per branch.
return {
  "Tile the computation with a grid and BlockSpecs whose last two block dims are multiples of 8 and 128.",
  "Increase the block size so each grid step does more work and per-step overhead is amortised; watch the VMEM budget.",
  "Accumulate the reduction in a float32 VMEM scratch buffer, with the reduction axis last in the grid and marked arbitrary.",
  "Mark independent grid axes as parallel in dimension_semantics so they can be split across cores.",
  "Reorder the grid so that a block index repeats on consecutive steps and its copy is skipped.",
  "Fuse the elementwise epilogue (bias, activation, residual) into the kernel instead of running it in XLA afterwards.",
  "Keep inputs in bf16 and accumulate in f32 with preferred_element_type=jnp.float32 in the dots.",
  "Use scalar prefetch (PrefetchScalarGridSpec) to pass indices or sizes that drive the index maps.",
  "Double-buffer manual DMAs (memory_space=pl.ANY with make_async_copy and semaphores) to overlap copies with compute.",
  "Use emit_pipeline for a nested pipeline over an inner dimension that does not fit in VMEM.",
  "Raise vmem_limit_bytes when larger blocks are worth it; the scoped default is far below physical VMEM.",
  "Pass a CostEstimate to pallas_call so XLA can schedule around the kernel.",
  "Compute softmax/normalisation online in one pass over the blocks (running max and sum).",
}
