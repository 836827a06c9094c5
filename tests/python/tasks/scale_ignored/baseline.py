"""A linear layer followed by a norm over one-element groups: every
normalised value is 0, so the output (bias + y) * y ignores x and the
weight at any size. It is frozen with a warning after three scales say so,
not after trying them all."""

import jax
import jax.numpy as jnp

CONFIG = {'name': 'scale_ignored'}


def create_inputs(dtype=jnp.float32):
    k1, k2, k3, k4 = jax.random.split(jax.random.key(3), 4)
    rows, cols = 2048, 1024
    x = jax.random.normal(k1, (rows, cols), dtype=dtype)
    y = jax.random.uniform(k2, (rows, cols), dtype=dtype)
    w = jax.random.normal(k3, (cols, cols), dtype=dtype) * 0.02
    b = jax.random.normal(k4, (cols,), dtype=dtype)
    return x, y, w, b


def workload(x, y, w, b):
    h = (x @ w)[..., None]  # groups of one element
    h = (h - jnp.mean(h, axis=-1, keepdims=True)) / jnp.sqrt(jnp.var(h, axis=-1, keepdims=True) + 1e-5)
    return (h[..., 0] + b + y) * y
