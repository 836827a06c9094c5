"""Two Pallas calls: row mean-squares first, then the scaling pass. Correct,
but x crosses HBM twice, so it cannot beat XLA's fused version."""
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl


def _ms_kernel(x_ref, ms_ref):
    x = x_ref[...].astype(jnp.float32)
    ms_ref[...] = jnp.mean(x * x, axis=-1, keepdims=True)


def _scale_kernel(x_ref, ms_ref, scale_ref, o_ref):
    x = x_ref[...].astype(jnp.float32)
    o_ref[...] = (x * jax.lax.rsqrt(ms_ref[...] + 1e-5) * scale_ref[...]).astype(o_ref.dtype)


def workload(x, scale):
    rows, cols = x.shape
    br = 8
    grid = (pl.cdiv(rows, br),)
    ms = pl.pallas_call(
        _ms_kernel,
        out_shape=jax.ShapeDtypeStruct((rows, 1), jnp.float32),
        grid=grid,
        in_specs=[pl.BlockSpec((br, cols), lambda i: (i, 0))],
        out_specs=pl.BlockSpec((br, 1), lambda i: (i, 0)),
    )(x)
    return pl.pallas_call(
        _scale_kernel,
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
        grid=grid,
        in_specs=[pl.BlockSpec((br, cols), lambda i: (i, 0)),
                  pl.BlockSpec((br, 1), lambda i: (i, 0)),
                  pl.BlockSpec((1, cols), lambda i: (0, 0))],
        out_specs=pl.BlockSpec((br, cols), lambda i: (i, 0)),
    )(x, ms, scale.reshape(1, cols))
