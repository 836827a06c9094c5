"""pallas_rows with 5-row blocks: legal Python and fine in plain interpret
mode, but the TPU (Mosaic) lowering rejects it: the last two dimensions of
a block must be divisible by (8, 128) or equal the array's."""
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl


def _rmsnorm_kernel(x_ref, scale_ref, o_ref):
    x = x_ref[...].astype(jnp.float32)
    ms = jnp.mean(x * x, axis=-1, keepdims=True)
    o_ref[...] = (x * jax.lax.rsqrt(ms + 1e-5) * scale_ref[...].astype(jnp.float32)).astype(o_ref.dtype)


def workload(x, scale):
    rows, cols = x.shape
    br = 5
    return pl.pallas_call(
        _rmsnorm_kernel,
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
        grid=(pl.cdiv(rows, br),),
        in_specs=[pl.BlockSpec((br, cols), lambda i: (i, 0)),
                  pl.BlockSpec((1, cols), lambda i: (0, 0))],
        out_specs=pl.BlockSpec((br, cols), lambda i: (i, 0)),
    )(x, scale.reshape(1, cols))
