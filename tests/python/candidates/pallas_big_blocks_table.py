"""The big-block matmul whose grid is driven by a table it builds with numpy
while tracing (as a splash kernel's mask tables are): the row blocks'
offsets, `np.arange(m).reshape(m // BM, BM)`, which numpy refuses at a
test scale below one block (no `raise` of its own); at the task's own
sizes it traces, and it is correct."""
import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

BM, BN, BK = 512, 512, 512


def _matmul(rows_ref, a_ref, b_ref, o_ref, acc_ref):
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
    rows = np.arange(m).reshape(m // BM, BM)[:, 0] // BM  # each row block's index, from the table
    return pl.pallas_call(
        _matmul,
        out_shape=jax.ShapeDtypeStruct((m, n), jnp.float32),
        grid_spec=pltpu.PrefetchScalarGridSpec(
            num_scalar_prefetch=1,
            grid=(len(rows), n // BN, k // BK),
            in_specs=[pl.BlockSpec((BM, BK), lambda i, j, s, r: (r[i], s)),
                      pl.BlockSpec((BK, BN), lambda i, j, s, r: (s, j))],
            out_specs=pl.BlockSpec((BM, BN), lambda i, j, s, r: (r[i], j)),
            scratch_shapes=[pltpu.VMEM((BM, BN), jnp.float32)]),
        compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel", "parallel", "arbitrary")),
    )(jnp.asarray(rows, jnp.int32), a, b)
