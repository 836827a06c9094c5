"""pallas_rows with eps = 1e-2 instead of 1e-5: about 0.5% off."""
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl


def _rmsnorm_kernel(x_ref, scale_ref, o_ref):
    x = x_ref[...].astype(jnp.float32)
    ms = jnp.mean(x * x, axis=-1, keepdims=True)
    o_ref[...] = (x * jax.lax.rsqrt(ms + 1e-2) * scale_ref[...]).astype(o_ref.dtype)


def workload(x, scale):
    rows, cols = x.shape
    return pl.pallas_call(
        _rmsnorm_kernel,
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
        grid=(pl.cdiv(rows, 16),),
        in_specs=[pl.BlockSpec((16, cols), lambda i: (i, 0)),
                  pl.BlockSpec((1, cols), lambda i: (0, 0))],
        out_specs=pl.BlockSpec((16, cols), lambda i: (i, 0)),
    )(x, scale.reshape(1, cols))
