"""pallas_dma with the wait in the wrong place: the scale is read from VMEM
while its DMA may still be in flight. Plain interpret mode runs the copy at
once, so the output looks right there; TPU interpret mode runs DMAs when
waited on (as hardware may) and its race detector reports the read."""
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

block_rows = 16


def _rmsnorm_kernel(x_ref, scale_hbm, o_ref, scale_vmem, sem):
    copy = pltpu.make_async_copy(scale_hbm, scale_vmem, sem)
    copy.start()
    x = x_ref[...].astype(jnp.float32)
    inv = jax.lax.rsqrt(jnp.mean(x * x, axis=-1, keepdims=True) + 1e-5)
    s = scale_vmem[...].astype(jnp.float32)  # read before the DMA is waited on
    copy.wait()
    o_ref[...] = (x * inv * s).astype(o_ref.dtype)


def workload(x, scale):
    rows, cols = x.shape
    br = block_rows
    return pl.pallas_call(
        _rmsnorm_kernel,
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
        grid=(pl.cdiv(rows, br),),
        in_specs=[pl.BlockSpec((br, cols), lambda i: (i, 0)),
                  pl.BlockSpec(memory_space=pl.ANY)],
        out_specs=pl.BlockSpec((br, cols), lambda i: (i, 0)),
        scratch_shapes=[pltpu.VMEM((1, cols), scale.dtype), pltpu.SemaphoreType.DMA(())],
        compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel",)),
    )(x, scale.reshape(1, cols))
