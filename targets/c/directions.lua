-- Optimisation ideas for C kernels on a multi-core CPU. Beam search draws
-- one per branch to steer the plan; add your own.
return {
  "Reorder loops so the innermost loop walks memory contiguously (unit stride) for every array it touches.",
  "Block (tile) the loops so the working set of the inner loops fits in the L1/L2 cache; pick tile sizes as tunables.",
  "Make the inner loop vectorisable: restrict-qualified pointers, no aliasing, no early exits, simple induction variables.",
  "Use explicit AVX2/AVX-512 intrinsics for the inner loop, with a scalar remainder loop for sizes that are not a multiple of the vector width.",
  "Parallelise the outermost independent loop with OpenMP (static schedule), making sure threads write disjoint output.",
  "Fuse consecutive passes over the same data into one pass, so each element is loaded from memory once.",
  "Hoist loop-invariant computations (divisions, square roots, index arithmetic) out of inner loops; replace division by multiplication with a reciprocal.",
  "Use several independent accumulators in reductions to break the dependency chain and let the CPU overlap additions.",
  "Unroll the inner loop by 4 or 8 and keep partial results in registers.",
  "Pack a block of one operand into a contiguous, aligned buffer before the inner loops (as GEMM libraries do).",
  "Reduce memory traffic: compute in registers and write each output element exactly once; avoid temporary arrays.",
  "Register-block the output: compute a small tile (e.g. 4x8) of outputs at once to reuse loaded operands.",
  "Align buffers and use aligned loads where possible; avoid false sharing between threads by padding per-thread data.",
  "Use a numerically equivalent but cheaper formulation (online softmax / single-pass mean and variance) that needs fewer passes.",
  "Choose the parallel grain carefully: parallelise over rows only when there are enough rows, otherwise over columns or blocks.",
}
