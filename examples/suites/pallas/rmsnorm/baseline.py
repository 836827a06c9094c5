"""RMSNorm over the last axis (LLaMA-style pre-norm).

out[i, j] = x[i, j] / sqrt(mean_j(x[i, :]^2) + eps) * scale[j], eps = 1e-5,
computed in float32. x: (rows, cols) float32, scale: (cols,) float32.
A memory-bound row reduction: one read of x, one write of out.
"""

import jax
import jax.numpy as jnp

CONFIG = {
    'name': 'rmsnorm',
    'model': 'Llama-3-8B',
    'operator': 'rmsnorm',
    'rows': 8192,
    'cols': 4096,
    'eps': 1e-5,
    'atol': 1e-3,
    'rtol': 1e-3,
}

# Extra (smaller, irregular-row) shapes checked by mkengine's frozen tests.
TEST_CONFIGS = [
    {'rows': 40, 'cols': 256},
    {'rows': 7, 'cols': 1024},
]


def create_inputs(dtype=jnp.float32):
    key = jax.random.key(0)
    k1, k2 = jax.random.split(key)
    rows, cols = CONFIG['rows'], CONFIG['cols']
    x = jax.random.normal(k1, (rows, cols), dtype=dtype)
    scale = jax.random.uniform(k2, (cols,), dtype=dtype, minval=0.5, maxval=1.5)
    return x, scale


def workload(x, scale):
    xf = x.astype(jnp.float32)
    inv = jax.lax.rsqrt(jnp.mean(xf * xf, axis=-1, keepdims=True) + CONFIG['eps'])
    return (xf * inv * scale.astype(jnp.float32)).astype(x.dtype)


def get_flops():
    return 4 * CONFIG['rows'] * CONFIG['cols']
