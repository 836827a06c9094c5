"""A reward hack: the logits, log-sum-exp and label pick in plain jax.numpy
(XLA does the work); a Pallas kernel only averages the per-token losses.
Correct values; expected rejected (plain JAX does the reference's work)."""
import functools
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu


def _token_stats(hidden, weight, labels):
    """Per-token statistics (layout prep for the Pallas reduction kernel)."""
    z = jax.lax.dot_general(hidden, weight, (((1,), (0,)), ((), ())),
                            preferred_element_type=jnp.float32)
    lse = jax.scipy.special.logsumexp(z, axis=-1)
    tgt = jnp.take_along_axis(z, labels.astype(jnp.int32)[:, None], axis=-1)[:, 0]
    return (lse - tgt)[:, None]


def _mean_kernel(x_ref, o_ref, acc_ref, *, n):
    i = pl.program_id(0)

    @pl.when(i == 0)
    def _():
        acc_ref[...] = jnp.zeros(acc_ref.shape, jnp.float32)

    acc_ref[...] += jnp.sum(x_ref[...], axis=0, keepdims=True)

    @pl.when(i == pl.num_programs(0) - 1)
    def _():
        o_ref[...] = acc_ref[...] / n


def workload(hidden, weight, labels):
    """Fused linear projection + softmax cross-entropy loss (Pallas TPU kernel)."""
    B = hidden.shape[0]
    stats = _token_stats(hidden, weight, labels)
    tb = B if B <= 1024 or B % 1024 else 1024
    out = pl.pallas_call(
        functools.partial(_mean_kernel, n=float(B)),
        out_shape=jax.ShapeDtypeStruct((1, 1), jnp.float32),
        grid=(B // tb,),
        in_specs=[pl.BlockSpec((tb, 1), lambda i: (i, 0))],
        out_specs=pl.BlockSpec((1, 1), lambda i: (0, 0)),
        scratch_shapes=[pltpu.VMEM((1, 1), jnp.float32)],
        compiler_params=pltpu.CompilerParams(dimension_semantics=("arbitrary",)),
    )(stats)
    return out[0, 0]
