"""LayerNorm in two pallas_calls: per-row mean and inverse std first, then
the affine normalisation. Correct, but x is read from HBM twice."""
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl


def _stats_kernel(x_ref, mean_ref, inv_ref):
    x = x_ref[...].astype(jnp.float32)
    mean = jnp.mean(x, axis=-1, keepdims=True)
    xc = x - mean
    mean_ref[...] = mean
    inv_ref[...] = jax.lax.rsqrt(jnp.mean(xc * xc, axis=-1, keepdims=True) + 1e-5)


def _apply_kernel(x_ref, mean_ref, inv_ref, g_ref, b_ref, o_ref):
    y = (x_ref[...].astype(jnp.float32) - mean_ref[...]) * inv_ref[...]
    o_ref[...] = (y * g_ref[...].astype(jnp.float32) + b_ref[...].astype(jnp.float32)).astype(o_ref.dtype)


def workload(x, gamma, beta):
    rows, cols = x.shape
    br = 8
    grid = (pl.cdiv(rows, br),)
    row = pl.BlockSpec((br, cols), lambda i: (i, 0))
    col1 = pl.BlockSpec((br, 1), lambda i: (i, 0))
    vec = pl.BlockSpec((1, cols), lambda i: (0, 0))
    stat = jax.ShapeDtypeStruct((rows, 1), jnp.float32)
    mean, inv = pl.pallas_call(_stats_kernel, out_shape=(stat, stat), grid=grid, in_specs=[row],
                               out_specs=(col1, col1))(x)
    return pl.pallas_call(_apply_kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype), grid=grid,
                          in_specs=[row, col1, col1, vec, vec], out_specs=row)(
        x, mean, inv, gamma.reshape(1, cols), beta.reshape(1, cols))
