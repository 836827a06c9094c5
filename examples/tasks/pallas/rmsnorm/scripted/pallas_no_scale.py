"""Normalises but forgets to multiply by scale."""
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl


def _rmsnorm_kernel(x_ref, o_ref):
    x = x_ref[...].astype(jnp.float32)
    o_ref[...] = (x * jax.lax.rsqrt(jnp.mean(x * x, axis=-1, keepdims=True) + 1e-5)).astype(o_ref.dtype)


def workload(x, scale):
    rows, cols = x.shape
    return pl.pallas_call(
        _rmsnorm_kernel,
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
        grid=(pl.cdiv(rows, 16),),
        in_specs=[pl.BlockSpec((16, cols), lambda i: (i, 0))],
        out_specs=pl.BlockSpec((16, cols), lambda i: (i, 0)),
    )(x)
