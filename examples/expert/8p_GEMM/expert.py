"""8p_GEMM (A: 8192 x 8192, B: 8192 x 28672, bf16) as a Pallas TPU kernel
tiled for those shapes: 1024 x 2048 output tiles, a 1024-deep K step, an
f32 accumulator in VMEM. The grid rounds up, so a last partial tile in M or
N is Pallas's edge block; K must be a multiple of the K step (a partial K
block would add its padding into the sum), which the kernel checks."""
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

TM, TN, TK = 1024, 2048, 1024


def _gemm_tile(a_ref, b_ref, o_ref, acc_ref):
    k = pl.program_id(2)

    @pl.when(k == 0)
    def _():
        acc_ref[...] = jnp.zeros_like(acc_ref)

    acc_ref[...] += jnp.dot(a_ref[...], b_ref[...], preferred_element_type=jnp.float32)

    @pl.when(k == pl.num_programs(2) - 1)
    def _():
        o_ref[...] = acc_ref[...].astype(o_ref.dtype)


def workload(A, B):
    m, kdim = A.shape
    n = B.shape[1]
    if kdim % TK:
        raise ValueError("K = %d is not a multiple of the K step %d" % (kdim, TK))
    return pl.pallas_call(
        _gemm_tile,
        out_shape=jax.ShapeDtypeStruct((m, n), A.dtype),
        grid=(pl.cdiv(m, TM), pl.cdiv(n, TN), kdim // TK),
        in_specs=[pl.BlockSpec((TM, TK), lambda i, j, k: (i, k)),
                  pl.BlockSpec((TK, TN), lambda i, j, k: (k, j))],
        out_specs=pl.BlockSpec((TM, TN), lambda i, j, k: (i, j)),
        scratch_shapes=[pltpu.VMEM((TM, TN), jnp.float32)],
        compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel", "parallel", "arbitrary")),
    )(A, B)
