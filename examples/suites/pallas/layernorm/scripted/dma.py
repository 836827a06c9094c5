"""rows.py with gamma and beta left in HBM (memory_space=pl.ANY) and copied
into VMEM scratch by two async DMAs that overlap the row statistics; both
semaphores are waited on before the affine step reads the scratch."""
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu


def _layernorm_kernel(x_ref, g_hbm, b_hbm, o_ref, g_vmem, b_vmem, sems):
    cg = pltpu.make_async_copy(g_hbm, g_vmem, sems.at[0])
    cb = pltpu.make_async_copy(b_hbm, b_vmem, sems.at[1])
    cg.start()
    cb.start()
    x = x_ref[...].astype(jnp.float32)
    mean = jnp.mean(x, axis=-1, keepdims=True)
    xc = x - mean
    y = xc * jax.lax.rsqrt(jnp.mean(xc * xc, axis=-1, keepdims=True) + 1e-5)
    cg.wait()
    cb.wait()
    o_ref[...] = (y * g_vmem[...].astype(jnp.float32) + b_vmem[...].astype(jnp.float32)).astype(o_ref.dtype)


def workload(x, gamma, beta):
    rows, cols = x.shape
    br = 16
    row = pl.BlockSpec((br, cols), lambda i: (i, 0))
    hbm = pl.BlockSpec(memory_space=pl.ANY)
    return pl.pallas_call(
        _layernorm_kernel,
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
        grid=(pl.cdiv(rows, br),),
        in_specs=[row, hbm, hbm],
        out_specs=row,
        scratch_shapes=[pltpu.VMEM((1, cols), gamma.dtype), pltpu.VMEM((1, cols), beta.dtype),
                        pltpu.SemaphoreType.DMA((2,))],
    )(x, gamma.reshape(1, cols), beta.reshape(1, cols))
