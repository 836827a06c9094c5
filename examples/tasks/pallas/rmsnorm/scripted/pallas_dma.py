"""RMSNorm with the scale vector brought into VMEM by an explicit DMA: x
arrives in row blocks through its BlockSpec, `scale` stays in HBM
(memory_space=pl.ANY) and each grid step copies it into a VMEM scratch with
pltpu.make_async_copy, waiting on the DMA semaphore before reading it."""
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

# mk:tune block_rows = [8, 16, 32]
block_rows = 16


def _rmsnorm_kernel(x_ref, scale_hbm, o_ref, scale_vmem, sem):
    copy = pltpu.make_async_copy(scale_hbm, scale_vmem, sem)
    copy.start()
    x = x_ref[...].astype(jnp.float32)
    inv = jax.lax.rsqrt(jnp.mean(x * x, axis=-1, keepdims=True) + 1e-5)
    copy.wait()
    o_ref[...] = (x * inv * scale_vmem[...].astype(jnp.float32)).astype(o_ref.dtype)


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
