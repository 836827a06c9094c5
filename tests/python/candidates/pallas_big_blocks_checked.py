"""The big-block matmul with its own shape check, as hand-written kernels have:
it refuses sizes its blocks do not tile, so at a test scale of 256 it raises
while tracing; at 512 and above it is correct."""
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
    if m % BM or n % BN or k % BK:
        raise ValueError("shapes (%d, %d, %d) must be multiples of the blocks (%d, %d, %d)" % (m, k, n, BM, BK, BN))
    return pl.pallas_call(
        _matmul,
        out_shape=jax.ShapeDtypeStruct((m, n), jnp.float32),
        grid=(m // BM, n // BN, k // BK),
        in_specs=[pl.BlockSpec((BM, BK), lambda i, j, s: (i, s)), pl.BlockSpec((BK, BN), lambda i, j, s: (s, j))],
        out_specs=pl.BlockSpec((BM, BN), lambda i, j, s: (i, j)),
        scratch_shapes=[pltpu.VMEM((BM, BN), jnp.float32)],
        compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel", "parallel", "arbitrary")),
    )(a, b)
