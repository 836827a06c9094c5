"""dma.py picking the label's logit before waiting on the labels' DMA: the
scratch is read while the copy may be in flight. Plain interpret mode copies
at once and passes; TPU interpret mode reports the race."""
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu


def _xent_kernel(logits_ref, labels_ref, o_ref, lab, sem):
    copy = pltpu.make_async_copy(labels_ref, lab, sem)
    copy.start()
    lf = logits_ref[...].astype(jnp.float32)
    m = jnp.max(lf, axis=-1, keepdims=True)
    lse = m + jnp.log(jnp.sum(jnp.exp(lf - m), axis=-1, keepdims=True))
    cols = jax.lax.broadcasted_iota(jnp.int32, lf.shape, 1)
    picked = jnp.sum(jnp.where(cols == lab[...], lf, 0.0), axis=-1, keepdims=True)
    copy.wait()
    o_ref[...] = lse - picked


def workload(logits, labels):
    tokens, vocab = logits.shape
    bt = 8
    out = pl.pallas_call(
        _xent_kernel,
        out_shape=jax.ShapeDtypeStruct((tokens, 1), jnp.float32),
        grid=(pl.cdiv(tokens, bt),),
        in_specs=[pl.BlockSpec((bt, vocab), lambda i: (i, 0)), pl.BlockSpec((bt, 1), lambda i: (i, 0))],
        out_specs=pl.BlockSpec((bt, 1), lambda i: (i, 0)),
        scratch_shapes=[pltpu.VMEM((bt, 1), jnp.int32), pltpu.SemaphoreType.DMA(())],
    )(logits, labels.reshape(tokens, 1))
    return out[:, 0]
