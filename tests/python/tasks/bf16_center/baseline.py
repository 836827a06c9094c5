"""Rows centred on their mean, in bfloat16 (the shape of a layer norm's
first step on activations with a large common offset): near 100 bfloat16
values are 0.5 apart, so the reference's rounded mean is up to 0.25 from
the true one and every value of its row carries that error, far over the
1e-2 tolerance. A kernel that computes in float32 is nearer the true
output than the reference is and must be judged correct; the suite holds
the reference evaluated in float32 to judge it by."""

import jax
import jax.numpy as jnp

CONFIG = {'name': 'bf16_center', 'rows': 64, 'cols': 256, 'atol': 1e-2, 'rtol': 1e-2}


def create_inputs(dtype=jnp.bfloat16):
    x = 100.0 + 4.0 * jax.random.normal(jax.random.key(3), (CONFIG['rows'], CONFIG['cols']), dtype=jnp.float32)
    return (x.astype(dtype),)


def workload(x):
    return x - jnp.mean(x, axis=-1, keepdims=True)
