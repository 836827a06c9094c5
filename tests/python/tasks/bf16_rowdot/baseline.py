"""Row dot products of bfloat16 inputs accumulated in float32: exact
products, a float32 sum, so the reference is as precise as its float32
evaluation (its own error is float32 rounding). The published tolerance
(1e-2) is far looser than that: a kernel 0.4% off passes it at hundreds of
times the reference's own error, which the check reports as a warning."""

import jax
import jax.numpy as jnp

CONFIG = {'rows': 64, 'cols': 256}


def create_inputs(dtype=jnp.bfloat16):
    k1, k2 = jax.random.split(jax.random.key(8))
    x = jax.random.normal(k1, (CONFIG['rows'], CONFIG['cols']), dtype=dtype)
    w = jax.random.normal(k2, (CONFIG['cols'],), dtype=dtype)
    return x, w


def workload(x, w):
    return jnp.dot(x, w, preferred_element_type=jnp.float32)
