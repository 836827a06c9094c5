"""RMSNorm reference (mkengine Pallas task format: JAXBench conventions).

out[i, j] = x[i, j] / sqrt(mean_j(x[i, :]^2) + 1e-5) * scale[j], float32.
"""

import jax
import jax.numpy as jnp

CONFIG = {'name': 'rmsnorm', 'rows': 4096, 'cols': 4096, 'eps': 1e-5}

# Irregular row counts (not multiples of 8); cols stay powers of two so the
# same kernels lower on the GPU (Triton) backend too.
TEST_CONFIGS = [
    {'rows': 37, 'cols': 256},
    {'rows': 1, 'cols': 1024},
]


def create_inputs(dtype=jnp.float32, seed=0):
    key = jax.random.fold_in(jax.random.key(7), seed)
    k1, k2 = jax.random.split(key)
    x = jax.random.normal(k1, (CONFIG['rows'], CONFIG['cols']), dtype=dtype)
    scale = jax.random.uniform(k2, (CONFIG['cols'],), dtype=dtype, minval=0.5, maxval=1.5)
    return x, scale


def workload(x, scale):
    xf = x.astype(jnp.float32)
    ms = jnp.mean(xf * xf, axis=-1, keepdims=True)
    return (xf / jnp.sqrt(ms + CONFIG['eps']) * scale.astype(jnp.float32)).astype(x.dtype)


def get_flops():
    return 4 * CONFIG['rows'] * CONFIG['cols']
