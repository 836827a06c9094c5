"""RACY on purpose: 8p_GEMM with 1024 x 512 output tiles (whole K per
step) whose result is copied to the output in HBM by a DMA the kernel
starts itself; it then clears the tile buffer before waiting for the copy,
so the DMA may read the cleared buffer. The values it writes are right on
a machine where the copy wins the race."""
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

TM, TN = 1024, 512


def _gemm_tile(a_ref, b_ref, o_hbm, tile_ref, sem):
    i, j = pl.program_id(0), pl.program_id(1)
    tile_ref[...] = jnp.dot(a_ref[...], b_ref[...], preferred_element_type=jnp.float32).astype(tile_ref.dtype)
    copy = pltpu.make_async_copy(tile_ref, o_hbm.at[pl.ds(i * TM, TM), pl.ds(j * TN, TN)], sem)
    copy.start()
    tile_ref[...] = jnp.zeros_like(tile_ref)  # the DMA is still reading it
    copy.wait()


def workload(A, B):
    m, kdim = A.shape
    n = B.shape[1]
    if m % TM or n % TN:
        raise ValueError("%d x %d is not a multiple of the %d x %d tiles" % (m, n, TM, TN))
    return pl.pallas_call(
        _gemm_tile,
        out_shape=jax.ShapeDtypeStruct((m, n), A.dtype),
        grid=(m // TM, n // TN),
        in_specs=[pl.BlockSpec((TM, kdim), lambda i, j: (i, 0)),
                  pl.BlockSpec((kdim, TN), lambda i, j: (0, j))],
        out_specs=pl.BlockSpec(memory_space=pl.ANY),
        scratch_shapes=[pltpu.VMEM((TM, TN), A.dtype), pltpu.SemaphoreType.DMA],
        compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel", "parallel")),
    )(A, B)
