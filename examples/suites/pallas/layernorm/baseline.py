"""LayerNorm over the last axis with affine parameters.

out = (x - mean) / sqrt(var + eps) * gamma + beta, eps = 1e-5, statistics
in float32 (biased variance). x: (rows, cols), gamma, beta: (cols,).
"""

import jax
import jax.numpy as jnp

CONFIG = {
    'name': 'layernorm',
    'operator': 'layernorm',
    'rows': 8192,
    'cols': 4096,
    'eps': 1e-5,
    'atol': 1e-3,
    'rtol': 1e-3,
}

TEST_CONFIGS = [
    {'rows': 48, 'cols': 384},
    {'rows': 3, 'cols': 2048},
]


def create_inputs(dtype=jnp.float32):
    key = jax.random.key(0)
    k1, k2, k3 = jax.random.split(key, 3)
    rows, cols = CONFIG['rows'], CONFIG['cols']
    x = jax.random.normal(k1, (rows, cols), dtype=dtype) * 2.0 + 0.5
    gamma = jax.random.uniform(k2, (cols,), dtype=dtype, minval=0.5, maxval=1.5)
    beta = jax.random.normal(k3, (cols,), dtype=dtype) * 0.1
    return x, gamma, beta


def workload(x, gamma, beta):
    xf = x.astype(jnp.float32)
    mean = jnp.mean(xf, axis=-1, keepdims=True)
    var = jnp.mean(jnp.square(xf - mean), axis=-1, keepdims=True)
    y = (xf - mean) * jax.lax.rsqrt(var + CONFIG['eps'])
    return (y * gamma.astype(jnp.float32) + beta.astype(jnp.float32)).astype(x.dtype)


def get_flops():
    return 8 * CONFIG['rows'] * CONFIG['cols']
