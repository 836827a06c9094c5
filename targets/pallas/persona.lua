--- What the sub-agents tell a model about the Pallas target: the hardware,
--- the language, the rules a candidate must follow (the allowed imports are
--- those targets/pallas/harness/screen.py's scan_candidate accepts), the
--- tunables syntax, a kernel skeleton, what a plan must settle and how
--- tuning injects values. Edit freely; the prompt tests check that every
--- target has the required fields. The device, versions and chip figures
--- come from facts() in facts.lua (table: tpu_chips.lua).
return {
  target_desc = "accelerators (TPU, or GPU where the facts below say so), in JAX with Pallas kernels "
    .. "(jax.experimental.pallas)",
  lang = "python",
  rules = "Rules: define the entry function with the same signature as the reference; use pl.pallas_call with "
    .. "BlockSpecs whose last two block dims are divisible by 8 and 128 (or equal the full array dims); "
    .. "accumulate reductions in float32 VMEM scratch with the reduction grid axis last and marked arbitrary; "
    .. "do not call the reference or jnp fallbacks for the main computation. Imports allowed: jax, jaxlib, "
    .. "numpy, functools, math, typing, dataclasses, itertools, operator, collections, enum, abc, __future__, "
    .. "ml_dtypes (any other import is rejected); no open, exec, eval, compile, __import__, globals, locals, "
    .. "vars, setattr, delattr, input.",
  tune_syntax = "# mk:tune block_m = [128, 256, 512]   (then a module-level default: block_m = 128)",
  skeleton = [[
import functools
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

# mk:tune bm = [128, 256]
bm = 256          # module globals: the tuner sets them after import
# mk:tune bk = [256, 512]
bk = 512

def _kernel(x_ref, y_ref, o_ref, acc_ref, *, k_total):
    k = pl.program_id(2)

    @pl.when(k == 0)
    def _():
        acc_ref[...] = jnp.zeros_like(acc_ref)

    x = x_ref[...]
    # mask the ragged last block of the reduction axis (out-of-range data is garbage)
    col = k * bk + jax.lax.broadcasted_iota(jnp.int32, x.shape, 1)
    x = jnp.where(col < k_total, x, 0)
    acc_ref[...] += jnp.dot(x, y_ref[...], preferred_element_type=jnp.float32)

    @pl.when(k == pl.num_programs(2) - 1)
    def _():
        o_ref[...] = acc_ref[...].astype(o_ref.dtype)

def entry(x, y):                      # read bm/bk here, at call time, never as default arguments
    m, kdim = x.shape
    n = y.shape[1]
    bn = n                            # a full dim is always a legal block dim
    grid = (pl.cdiv(m, bm), pl.cdiv(n, bn), pl.cdiv(kdim, bk))
    return pl.pallas_call(
        functools.partial(_kernel, k_total=kdim),
        out_shape=jax.ShapeDtypeStruct((m, n), x.dtype),
        grid=grid,
        in_specs=[pl.BlockSpec((bm, bk), lambda i, j, k: (i, k)),
                  pl.BlockSpec((bk, bn), lambda i, j, k: (k, j))],
        out_specs=pl.BlockSpec((bm, bn), lambda i, j, k: (i, j)),
        scratch_shapes=[pltpu.VMEM((bm, bn), jnp.float32)],
        compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel", "parallel", "arbitrary")),
    )(x, y)]],
  plan_template = "Settle: the grid (its axes, which are parallel and which arbitrary, the reduction axis "
    .. "last); each operand's BlockSpec (block shape, index map, how ragged edges are masked); which memory "
    .. "space holds what (VMEM blocks, SMEM scalars, HBM with manual DMA, scratch accumulators); an estimate "
    .. "of VMEM use per step (double-buffered inputs and outputs plus scratch, in bytes) against the VMEM size "
    .. "above; and the arithmetic intensity against the MXU shape.",
  tune_notes = "How the values are injected: the engine imports the module, then sets each tunable as a "
    .. "module global (setattr on the module) before the first trace. So read tunables at call time inside "
    .. "the entry function; a value baked into a default argument, a functools.partial at import time or a "
    .. "jax.jit closure created at import makes tuning a no-op. Offer block sizes that respect the (8, 128) "
    .. "tiling: second-to-last block dims multiples of 8, last block dims multiples of 128 (or the full dim), "
    .. "preferably divisors of the benchmark shapes above; keep the VMEM use of the largest within the VMEM size.",
}
