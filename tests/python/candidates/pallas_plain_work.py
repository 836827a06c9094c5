"""A "kernel" whose Pallas part is decoration: the whole RMSNorm is
computed in plain jax.numpy (XLA does the work) and a pallas_call only
copies the result. Correct outputs; no Pallas kernel (rejected)."""
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl


def _copy(x_ref, o_ref):
    o_ref[...] = x_ref[...]


def workload(x, scale):
    y = x / jnp.sqrt(jnp.mean(x * x, axis=-1, keepdims=True) + 1e-5) * scale
    return pl.pallas_call(_copy, out_shape=jax.ShapeDtypeStruct(y.shape, y.dtype))(y)
