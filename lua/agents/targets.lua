--- What the sub-agents tell a model about each target: the hardware, the
--- language, the rules a candidate must follow and the tunables syntax.
--- Edit freely; the prompt tests check that each target has every field.
return {
  c = {
    target_desc = "a multi-core x86-64 CPU, in C11 with OpenMP (compiled with cc -O3 -march=native -fopenmp)",
    lang = "c",
    rules = "Rules: plain C11, any standard header, intrinsics and OpenMP pragmas are allowed; no file or network "
      .. "I/O, no processes, no dlopen, no timers, no signals, no constructors, no global state that survives "
      .. "between calls; the function must compute the full result on every call.",
    tune_syntax = "// mk:tune NAME v1 v2 v3   (then #ifndef NAME / #define NAME v1 / #endif)",
  },
  pallas = {
    target_desc = "TPU (or GPU) accelerators, in JAX with Pallas kernels (jax.experimental.pallas)",
    lang = "python",
    rules = "Rules: define the entry function with the same signature as the reference; use pl.pallas_call with "
      .. "BlockSpecs whose last two block dims are divisible by 8 and 128 (or equal the full array dims); "
      .. "accumulate reductions in float32 VMEM scratch with the reduction grid axis last and marked arbitrary; "
      .. "do not call the reference or jnp fallbacks for the main computation.",
    tune_syntax = "# mk:tune block_m = [128, 256, 512]",
  },
}
