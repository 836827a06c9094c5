"""dma.py with the wait after the scratch is read: the exponentials use the
copy's destination while the DMA may still be writing it. Plain interpret
mode copies at once and passes; TPU interpret mode reports the race."""
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu


def _softmax_kernel(x_ref, o_ref, buf, sem):
    copy = pltpu.make_async_copy(x_ref, buf, sem)
    copy.start()
    m = jnp.max(x_ref[...].astype(jnp.float32), axis=-1, keepdims=True)
    e = jnp.exp(buf[...].astype(jnp.float32) - m)  # read before the wait
    copy.wait()
    o_ref[...] = (e / jnp.sum(e, axis=-1, keepdims=True)).astype(o_ref.dtype)


def workload(x):
    rows, cols = x.shape
    br = 8
    return pl.pallas_call(
        _softmax_kernel,
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
        grid=(pl.cdiv(rows, br),),
        in_specs=[pl.BlockSpec((br, cols), lambda i: (i, 0))],
        out_specs=pl.BlockSpec((br, cols), lambda i: (i, 0)),
        scratch_shapes=[pltpu.VMEM((br, cols), x.dtype), pltpu.SemaphoreType.DMA(())],
    )(x)
