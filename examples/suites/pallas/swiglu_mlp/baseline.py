"""SwiGLU feed-forward block (LLaMA MLP).

out = (silu(x @ w_gate) * (x @ w_up)) @ w_down with x: (tokens, d_model),
w_gate, w_up: (d_model, d_ff), w_down: (d_ff, d_model), all bfloat16,
float32 accumulation. Three GEMMs; fusing the gate and up projections and
the activation saves an HBM round trip of the (tokens, d_ff) intermediates.
"""

import jax
import jax.numpy as jnp

CONFIG = {
    'name': 'swiglu_mlp',
    'model': 'Llama-3-8B',
    'operator': 'swiglu_mlp',
    'tokens': 2048,
    'd_model': 4096,
    'd_ff': 14336,
    'atol': 5e-2,
    'rtol': 5e-2,
}

TEST_CONFIGS = [
    {'tokens': 128, 'd_model': 256, 'd_ff': 512},
]


def create_inputs(dtype=jnp.bfloat16):
    key = jax.random.key(0)
    k1, k2, k3, k4 = jax.random.split(key, 4)
    t, d, f = CONFIG['tokens'], CONFIG['d_model'], CONFIG['d_ff']
    x = jax.random.normal(k1, (t, d), dtype=dtype)
    wg = (jax.random.normal(k2, (d, f), dtype=jnp.float32) / d ** 0.5).astype(dtype)
    wu = (jax.random.normal(k3, (d, f), dtype=jnp.float32) / d ** 0.5).astype(dtype)
    wd = (jax.random.normal(k4, (f, d), dtype=jnp.float32) / f ** 0.5).astype(dtype)
    return x, wg, wu, wd


def workload(x, w_gate, w_up, w_down):
    g = jnp.dot(x, w_gate, preferred_element_type=jnp.float32)
    u = jnp.dot(x, w_up, preferred_element_type=jnp.float32)
    h = (jax.nn.silu(g) * u).astype(x.dtype)
    return jnp.dot(h, w_down, preferred_element_type=jnp.float32).astype(x.dtype)


def get_flops():
    t, d, f = CONFIG['tokens'], CONFIG['d_model'], CONFIG['d_ff']
    return 3 * 2 * t * d * f
