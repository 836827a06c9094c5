"""RMSNorm, 64 rows per grid step: fewer, larger steps amortise the
per-step overhead on a memory-bound row reduction."""
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl


def _rmsnorm_kernel(x_ref, scale_ref, o_ref):
    x = x_ref[...].astype(jnp.float32)
    inv = jax.lax.rsqrt(jnp.mean(x * x, axis=-1, keepdims=True) + 1e-5)
    o_ref[...] = (x * inv * scale_ref[...]).astype(o_ref.dtype)


def workload(x, scale):
    rows, cols = x.shape
    return pl.pallas_call(
        _rmsnorm_kernel,
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
        grid=(pl.cdiv(rows, 64),),
        in_specs=[pl.BlockSpec((64, cols), lambda i: (i, 0)),
                  pl.BlockSpec((1, cols), lambda i: (0, 0))],
        out_specs=pl.BlockSpec((64, cols), lambda i: (i, 0)),
    )(x, scale.reshape(1, cols))
