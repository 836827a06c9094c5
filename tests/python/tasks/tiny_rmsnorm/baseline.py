"""Tiny RMSNorm for the harness tests: out = x / sqrt(mean(x^2) + eps) * scale.

Written in the numpy-compatible subset of jax.numpy so the same task runs
under real JAX and under the tests' numpy stand-in.
"""

import jax
import jax.numpy as jnp

CONFIG = {'name': 'tiny_rmsnorm_cfg', 'rows': 16, 'cols': 128, 'eps': 1e-5, 'atol': 1e-4, 'rtol': 1e-4}

TEST_CONFIGS = [{'rows': 5, 'cols': 7}]


def create_inputs(dtype=jnp.float32):
    key = jax.random.key(0)
    k1, k2 = jax.random.split(key, 2)
    x = jax.random.normal(k1, (CONFIG['rows'], CONFIG['cols']), dtype=dtype)
    scale = jax.random.normal(k2, (CONFIG['cols'],), dtype=dtype)
    return x, scale


def workload(x, scale):
    ms = jnp.mean(x * x, axis=-1, keepdims=True)
    return x / jnp.sqrt(ms + CONFIG['eps']) * scale


def get_flops():
    return 4 * CONFIG['rows'] * CONFIG['cols']
