"""A Pallas RMSNorm for tests/python/tasks/multi_config (whole arrays as
one block: right for any row count); SCALE = 1.001 makes it 0.1% too large
(within the 1e-2 of the task's second and third configurations, outside
the 1e-4 of its first)."""
import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

SCALE = 1.0


def _kernel(x_ref, w_ref, o_ref, *, eps):
    x = x_ref[...]
    ms = jnp.mean(x * x, axis=-1, keepdims=True)
    o_ref[...] = x * jax.lax.rsqrt(ms + eps) * w_ref[...] * SCALE


def computation(x, w, eps):
    return pl.pallas_call(functools.partial(_kernel, eps=eps),
                          out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(x, w.reshape(1, -1))
