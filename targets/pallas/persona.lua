--- What the sub-agents tell a model about the Pallas target: the hardware,
--- the language, the rules a candidate must follow and the tunables syntax.
--- Edit freely; the prompt tests check that every target has each field.
return {
  target_desc = "TPU (or GPU) accelerators, in JAX with Pallas kernels (jax.experimental.pallas)",
  lang = "python",
  rules = "Rules: define the entry function with the same signature as the reference; use pl.pallas_call with "
    .. "BlockSpecs whose last two block dims are divisible by 8 and 128 (or equal the full array dims); "
    .. "accumulate reductions in float32 VMEM scratch with the reduction grid axis last and marked arbitrary; "
    .. "do not call the reference or jnp fallbacks for the main computation.",
  tune_syntax = "# mk:tune block_m = [128, 256, 512]",
}
