"""1p_Flash_Attention (q, k, v: 4 x 64 x 4096 x 128 bf16, causal) as a
Pallas TPU flash-attention kernel that streams K and V itself: one grid
step per 2048-row query block; K and V stay in HBM and the kernel walks
the 512-row key blocks up to the diagonal with a loop, copying block j + 1
into the other half of a double buffer (async DMAs, one semaphore per
buffer and operand) while it computes on block j, with an online softmax
in float32. The sequence must be a multiple of both blocks, which the
kernel checks."""
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

BLOCK_Q, BLOCK_K = 2048, 512
MASKED = -1e30


def _flash_kernel(q_ref, k_hbm, v_hbm, o_ref, k_buf, v_buf, sem, *, scale):
    b, h, i = pl.program_id(0), pl.program_id(1), pl.program_id(2)
    q_first = i * BLOCK_Q
    n_blocks = (q_first + BLOCK_Q - 1) // BLOCK_K + 1  # key blocks up to the diagonal

    def copies(slot, j):
        rows = pl.ds(pl.multiple_of(j * BLOCK_K, BLOCK_K), BLOCK_K)
        return (pltpu.make_async_copy(k_hbm.at[b, h, rows], k_buf.at[slot], sem.at[0, slot]),
                pltpu.make_async_copy(v_hbm.at[b, h, rows], v_buf.at[slot], sem.at[1, slot]))

    for c in copies(0, 0):
        c.start()
    q = q_ref[...]

    def step(j, carry):
        m_prev, l_prev, acc = carry
        slot = j % 2

        @pl.when(j + 1 < n_blocks)
        def _prefetch():
            for c in copies(1 - slot, j + 1):
                c.start()

        k_copy, v_copy = copies(slot, j)
        k_copy.wait()
        s = jax.lax.dot_general(q, k_buf[slot], (((1,), (1,)), ((), ())),
                                preferred_element_type=jnp.float32) * scale
        row = q_first + jax.lax.broadcasted_iota(jnp.int32, s.shape, 0)
        col = j * BLOCK_K + jax.lax.broadcasted_iota(jnp.int32, s.shape, 1)
        s = jnp.where(col <= row, s, MASKED)
        m_new = jnp.maximum(m_prev, jnp.max(s, axis=1, keepdims=True))
        alpha = jnp.exp(m_prev - m_new)
        p = jnp.exp(s - m_new)
        v_copy.wait()
        pv = jnp.dot(p.astype(v_buf.dtype), v_buf[slot], preferred_element_type=jnp.float32)
        return m_new, alpha * l_prev + jnp.sum(p, axis=1, keepdims=True), acc * alpha + pv

    init = (jnp.full((BLOCK_Q, 1), MASKED, jnp.float32), jnp.zeros((BLOCK_Q, 1), jnp.float32),
            jnp.zeros(o_ref.shape, jnp.float32))
    _, l, acc = jax.lax.fori_loop(0, n_blocks, step, init)
    o_ref[...] = (acc / l).astype(o_ref.dtype)


def workload(query, key, value):
    b, h, s, d = query.shape
    if s % BLOCK_Q or s % BLOCK_K:
        raise ValueError("seq_len %d is not a multiple of the blocks (%d, %d)" % (s, BLOCK_Q, BLOCK_K))
    kernel = lambda *refs: _flash_kernel(*refs, scale=d ** -0.5)
    return pl.pallas_call(
        kernel,
        out_shape=jax.ShapeDtypeStruct(query.shape, query.dtype),
        grid=(b, h, s // BLOCK_Q),
        in_specs=[pl.BlockSpec((None, None, BLOCK_Q, d), lambda b, h, i: (b, h, i, 0)),
                  pl.BlockSpec(memory_space=pl.ANY),
                  pl.BlockSpec(memory_space=pl.ANY)],
        out_specs=pl.BlockSpec((None, None, BLOCK_Q, d), lambda b, h, i: (b, h, i, 0)),
        scratch_shapes=[pltpu.VMEM((2, BLOCK_K, d), key.dtype),
                        pltpu.VMEM((2, BLOCK_K, d), value.dtype),
                        pltpu.SemaphoreType.DMA((2, 2))],
        compiler_params=pltpu.CompilerParams(
            dimension_semantics=("parallel", "parallel", "parallel"),
            vmem_limit_bytes=64 * 1024 * 1024),
    )(query, key, value)


computation = workload  # the MaxKernel layout's entry
