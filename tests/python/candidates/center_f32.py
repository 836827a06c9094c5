"""bf16_center in float32: nearer the true output than the bfloat16
reference, which is up to 0.25 off (tests/python/tasks/bf16_center)."""
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

SHIFT = 0.0  # the test's wrong twin sets it: a kernel off by a constant


def _kernel(x_ref, o_ref):
    x = x_ref[...].astype(jnp.float32)
    o_ref[...] = x - jnp.mean(x, axis=-1, keepdims=True) + SHIFT


def workload(x):
    return pl.pallas_call(_kernel, out_shape=jax.ShapeDtypeStruct(x.shape, jnp.float32))(x)
