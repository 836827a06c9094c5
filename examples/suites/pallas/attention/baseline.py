"""Causal multi-head self-attention forward (flash-attention shaped).

q, k, v: (batch, heads, seq, head_dim) bfloat16. scores = q k^T / sqrt(d)
with a causal mask (key position <= query position), softmax in float32,
out = softmax(scores) v in bfloat16, shape (batch, heads, seq, head_dim).
"""

import jax
import jax.numpy as jnp

CONFIG = {
    'name': 'causal_attention',
    'model': 'Llama-3-8B',
    'operator': 'attention',
    'batch': 4,
    'heads': 32,
    'seq': 2048,
    'head_dim': 128,
    'atol': 2e-2,
    'rtol': 2e-2,
}

TEST_CONFIGS = [
    {'batch': 1, 'heads': 2, 'seq': 256, 'head_dim': 128},
]


def create_inputs(dtype=jnp.bfloat16):
    key = jax.random.key(0)
    kq, kk, kv = jax.random.split(key, 3)
    shape = (CONFIG['batch'], CONFIG['heads'], CONFIG['seq'], CONFIG['head_dim'])
    q = jax.random.normal(kq, shape, dtype=dtype)
    k = jax.random.normal(kk, shape, dtype=dtype)
    v = jax.random.normal(kv, shape, dtype=dtype)
    return q, k, v


def workload(q, k, v):
    d = q.shape[-1]
    s = jnp.einsum('bhqd,bhkd->bhqk', q, k, preferred_element_type=jnp.float32) / (d ** 0.5)
    n = q.shape[2]
    mask = jnp.arange(n)[:, None] >= jnp.arange(n)[None, :]
    s = jnp.where(mask, s, -jnp.inf)
    p = jax.nn.softmax(s, axis=-1)
    return jnp.einsum('bhqk,bhkd->bhqd', p.astype(v.dtype), v,
                      preferred_element_type=jnp.float32).astype(q.dtype)


def get_flops():
    b, h, n, d = CONFIG['batch'], CONFIG['heads'], CONFIG['seq'], CONFIG['head_dim']
    return 2 * 2 * b * h * n * n * d // 2  # causal: half of the two matmuls
