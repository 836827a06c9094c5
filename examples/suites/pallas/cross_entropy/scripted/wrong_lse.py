"""rows.py taking the row max for the log-sum-exp (no exponentials): close
for peaked rows, wrong for these."""
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

block_tokens = 8


def _xent_kernel(logits_ref, labels_ref, o_ref):
    lf = logits_ref[...].astype(jnp.float32)
    m = jnp.max(lf, axis=-1, keepdims=True)
    lse = m
    cols = jax.lax.broadcasted_iota(jnp.int32, lf.shape, 1)
    picked = jnp.sum(jnp.where(cols == labels_ref[...], lf, 0.0), axis=-1, keepdims=True)
    o_ref[...] = lse - picked


def workload(logits, labels):
    tokens, vocab = logits.shape
    bt = block_tokens
    out = pl.pallas_call(
        _xent_kernel,
        out_shape=jax.ShapeDtypeStruct((tokens, 1), jnp.float32),
        grid=(pl.cdiv(tokens, bt),),
        in_specs=[pl.BlockSpec((bt, vocab), lambda i: (i, 0)), pl.BlockSpec((bt, 1), lambda i: (i, 0))],
        out_specs=pl.BlockSpec((bt, 1), lambda i: (i, 0)),
        compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel",)),
    )(logits, labels.reshape(tokens, 1))
    return out[:, 0]
