"""The RMSNorm computed in plain JAX one row at a time in a lax.while_loop
(the loop's trips fixed by its jaxpr: from 0 to the row count, step 1),
and a pallas_call that only copies the result: its plain-JAX part does the
reference's work, counted once per trip (not once for the loop body)."""
import jax
import jax.numpy as jnp
from jax import lax
from jax.experimental import pallas as pl


def _copy(x_ref, o_ref):
    o_ref[...] = x_ref[...]


def workload(x, scale):
    rows = x.shape[0]

    def body(c):
        i, y = c
        r = lax.dynamic_slice_in_dim(x, i, 1, axis=0)
        r = r / jnp.sqrt(jnp.mean(r * r, axis=-1, keepdims=True) + 1e-5) * scale
        return i + 1, lax.dynamic_update_slice_in_dim(y, r, i, axis=0)

    _, y = lax.while_loop(lambda c: c[0] < rows, body, (0, jnp.zeros_like(x)))
    return pl.pallas_call(_copy, out_shape=jax.ShapeDtypeStruct(y.shape, y.dtype))(y)
