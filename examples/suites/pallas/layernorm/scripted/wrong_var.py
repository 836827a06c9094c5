"""rows.py with the variance taken as E[x^2] (no mean subtracted): wrong
whenever the rows do not have zero mean (these have mean 0.5)."""
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

block_rows = 16


def _layernorm_kernel(x_ref, g_ref, b_ref, o_ref):
    x = x_ref[...].astype(jnp.float32)
    mean = jnp.mean(x, axis=-1, keepdims=True)
    xc = x - mean
    var = jnp.mean(x * x, axis=-1, keepdims=True)
    y = xc * jax.lax.rsqrt(var + 1e-5)
    o_ref[...] = (y * g_ref[...].astype(jnp.float32) + b_ref[...].astype(jnp.float32)).astype(o_ref.dtype)


def workload(x, gamma, beta):
    rows, cols = x.shape
    br = block_rows
    row = pl.BlockSpec((br, cols), lambda i: (i, 0))
    vec = pl.BlockSpec((1, cols), lambda i: (0, 0))
    return pl.pallas_call(
        _layernorm_kernel,
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
        grid=(pl.cdiv(rows, br),),
        in_specs=[row, vec, vec],
        out_specs=row,
        compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel",)),
    )(x, gamma.reshape(1, cols), beta.reshape(1, cols))
