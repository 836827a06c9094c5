"""Numerically stable softmax over the last axis.

out[i, j] = exp(x[i, j] - max_j x[i, :]) / sum_j exp(x[i, j] - max_j x[i, :]).
x: (rows, cols) float32. Memory-bound; a fused kernel reads x once.
"""

import jax
import jax.numpy as jnp

CONFIG = {
    'name': 'softmax',
    'operator': 'softmax',
    'rows': 4096,
    'cols': 8192,
    'atol': 1e-5,
    'rtol': 1e-3,
}

TEST_CONFIGS = [
    {'rows': 24, 'cols': 512},
    {'rows': 5, 'cols': 2048},
]


def create_inputs(dtype=jnp.float32):
    key = jax.random.key(0)
    x = jax.random.normal(key, (CONFIG['rows'], CONFIG['cols']), dtype=dtype) * 4.0
    return (x,)


def workload(x):
    xf = x.astype(jnp.float32)
    m = jnp.max(xf, axis=-1, keepdims=True)
    e = jnp.exp(xf - m)
    return (e / jnp.sum(e, axis=-1, keepdims=True)).astype(x.dtype)


def get_flops():
    return 5 * CONFIG['rows'] * CONFIG['cols']
