"""Per-token softmax cross-entropy from logits and integer labels.

logits: (tokens, vocab) float32, labels: (tokens,) int32 in [0, vocab).
loss[t] = logsumexp(logits[t, :]) - logits[t, labels[t]], shape (tokens,).
A row reduction over a large vocabulary; memory-bound.
"""

import jax
import jax.numpy as jnp

CONFIG = {
    'name': 'cross_entropy',
    'operator': 'cross_entropy',
    'tokens': 4096,
    'vocab': 32768,
    'atol': 1e-4,
    'rtol': 1e-4,
}

TEST_CONFIGS = [
    {'tokens': 16, 'vocab': 1024},
]


def create_inputs(dtype=jnp.float32):
    key = jax.random.key(0)
    k1, k2 = jax.random.split(key)
    logits = jax.random.normal(k1, (CONFIG['tokens'], CONFIG['vocab']), dtype=dtype) * 3.0
    labels = jax.random.randint(k2, (CONFIG['tokens'],), 0, CONFIG['vocab'], dtype=jnp.int32)
    return logits, labels


def workload(logits, labels):
    lf = logits.astype(jnp.float32)
    lse = jax.nn.logsumexp(lf, axis=-1)
    picked = jnp.take_along_axis(lf, labels[:, None], axis=-1)[:, 0]
    return lse - picked


def get_flops():
    return 4 * CONFIG['tokens'] * CONFIG['vocab']
