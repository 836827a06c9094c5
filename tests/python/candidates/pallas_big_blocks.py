"""A matmul tiled for the task's own sizes: 512 x 512 output blocks and a
512-deep K step. At a test scale of 256 its grid is empty (256 // 512 = 0)
and the output is never written; at 512 and above it is correct."""
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

BM, BN, BK = 512, 512, 512


def _matmul(a_ref, b_ref, o_ref, acc_ref):
    @pl.when(pl.program_id(2) == 0)
    def _():
        acc_ref[...] = jnp.zeros_like(acc_ref)

    acc_ref[...] += jnp.dot(a_ref[...], b_ref[...], preferred_element_type=jnp.float32)

    @pl.when(pl.program_id(2) == pl.num_programs(2) - 1)
    def _():
        o_ref[...] = acc_ref[...]


def workload(a, b):
    m, k = a.shape
    n = b.shape[1]
    return pl.pallas_call(
        _matmul,
        out_shape=jax.ShapeDtypeStruct((m, n), jnp.float32),
        grid=(m // BM, n // BN, k // BK),
        in_specs=[pl.BlockSpec((BM, BK), lambda i, j, s: (i, s)), pl.BlockSpec((BK, BN), lambda i, j, s: (s, j))],
        out_specs=pl.BlockSpec((BM, BN), lambda i, j, s: (i, j)),
        scratch_shapes=[pltpu.VMEM((BM, BN), jnp.float32)],
        compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel", "parallel", "arbitrary")),
    )(a, b)
