"""Fused GEMM + bias + GELU (tanh approximation), KernelBench level-2 style.

out = gelu(x @ w + b) with x: (M, K), w: (K, N), b: (N,) in bfloat16;
the matmul accumulates in float32 and the epilogue runs in float32 before
the cast back to bfloat16. Compute-bound at the default size.
"""

import jax
import jax.numpy as jnp

CONFIG = {
    'name': 'matmul_bias_gelu',
    'operator': 'gemm_bias_gelu',
    'M': 4096,
    'K': 4096,
    'N': 4096,
    'atol': 2e-2,
    'rtol': 2e-2,
}

TEST_CONFIGS = [
    {'M': 256, 'K': 512, 'N': 384},
]


def create_inputs(dtype=jnp.bfloat16):
    key = jax.random.key(0)
    k1, k2, k3 = jax.random.split(key, 3)
    M, K, N = CONFIG['M'], CONFIG['K'], CONFIG['N']
    x = jax.random.normal(k1, (M, K), dtype=dtype)
    w = (jax.random.normal(k2, (K, N), dtype=jnp.float32) / (K ** 0.5)).astype(dtype)
    b = (jax.random.normal(k3, (N,), dtype=jnp.float32) * 0.1).astype(dtype)
    return x, w, b


def workload(x, w, b):
    acc = jnp.dot(x, w, preferred_element_type=jnp.float32)
    return jax.nn.gelu(acc + b.astype(jnp.float32), approximate=True).astype(x.dtype)


def get_flops():
    M, K, N = CONFIG['M'], CONFIG['K'], CONFIG['N']
    return 2 * M * K * N + 10 * M * N
