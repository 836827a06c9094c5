"""Sizes written in create_inputs (which never reads CONFIG), and one the
workload writes down itself (hidden = 2048): that one must keep its value."""

import jax
import jax.numpy as jnp

CONFIG = {'name': 'scale_literals'}


def create_inputs(dtype=jnp.float32):
    key = jax.random.key(0xC0FFEE)
    k1, k2 = jax.random.split(key)
    rows, cols, hidden = 4096, 1024, 2048
    x = jax.random.normal(k1, (rows, cols), dtype=dtype)
    w = jax.random.normal(k2, (cols, hidden), dtype=dtype) * 0.05
    return x, w, jax.random.normal(k2, 2048, dtype=dtype)


def workload(x, w, b):
    hidden = 2048
    y = (x @ w + b).reshape(-1, 16, hidden // 16)
    return jnp.max(y, axis=-1)
