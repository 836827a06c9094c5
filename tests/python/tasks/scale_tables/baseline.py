"""Ragged rows, as ragged paged attention writes them: a module-level
table of row lengths, written for the task's own sizes, is padded to
`max_rows` and packed into `max_tokens`; dividing those breaks the
reference (a negative pad), so only the widths (heads, head_dim) shrink.
At its own sizes its inputs pass the input budget (268 MB)."""

import jax
import jax.numpy as jnp

ROW_LENS = (1,) * 24 + (256,) * 3 + (200,)  # 28 rows, 992 tokens

CONFIG = {'name': 'scale_tables', 'max_tokens': 1024, 'max_rows': 32, 'num_heads': 64, 'head_dim': 1024}


def create_inputs(dtype=jnp.float32):
    k1, k2 = jax.random.split(jax.random.key(5))
    t, h, d = CONFIG['max_tokens'], CONFIG['num_heads'], CONFIG['head_dim']
    q = jax.random.normal(k1, (t, h, d), dtype=dtype)
    w = jax.random.normal(k2, (h, d), dtype=dtype) * d ** -0.5
    lens = jnp.pad(jnp.array(ROW_LENS, dtype=jnp.int32), (0, CONFIG['max_rows'] - len(ROW_LENS)))
    starts = jnp.concatenate([jnp.zeros((1,), jnp.int32), jnp.cumsum(lens)[:-1]])
    return q, w, starts, lens


def workload(q, w, starts, lens):
    scores = jnp.einsum('thd,hd->th', q, w)
    out = jnp.zeros_like(scores)
    for i, cap in enumerate(ROW_LENS):  # static capacities, lengths from the inputs
        pos = jnp.minimum(starts[i] + jnp.arange(cap), CONFIG['max_tokens'] - 1)
        valid = (jnp.arange(cap) < lens[i])[:, None]
        p = jax.nn.softmax(jnp.where(valid, scores[pos], -jnp.inf), axis=0)
        out = out.at[pos].add(jnp.where(valid, p, 0.0))
    return out
