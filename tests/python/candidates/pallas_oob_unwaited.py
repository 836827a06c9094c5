"""Prefetches the next 8-row block of x with an async DMA at every grid step,
without the guard on the last step (whose next block lies past x's end),
and never waits for that copy: the output is right, the DMA reads out of
bounds. TPU interpret mode executing DMAs at their wait never ran (nor
checked) it; executed when started, it is an out-of-bounds read."""
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu


def _kernel(x_ref, x_hbm, s_ref, o_ref, buf, sem):
    i = pl.program_id(0)
    pltpu.make_async_copy(x_hbm.at[pl.ds((i + 1) * 8, 8)], buf, sem.at[0]).start()  # never waited
    x = x_ref[...]
    o_ref[...] = x * jax.lax.rsqrt(jnp.mean(x * x, axis=-1, keepdims=True) + 1e-5) * s_ref[...]


def workload(x, scale):
    rows, cols = x.shape
    return pl.pallas_call(
        _kernel,
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
        grid=(rows // 8,),
        in_specs=[pl.BlockSpec((8, cols), lambda i: (i, 0)), pl.BlockSpec(memory_space=pl.ANY),
                  pl.BlockSpec((1, cols), lambda i: (0, 0))],
        out_specs=pl.BlockSpec((8, cols), lambda i: (i, 0)),
        scratch_shapes=[pltpu.VMEM((8, cols), x.dtype), pltpu.SemaphoreType.DMA((1,))],
    )(x, x, scale.reshape(1, cols))
