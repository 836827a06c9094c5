"""1p_Flash_Attention (q, k, v: 4 x 64 x 4096 x 128 bf16, causal) as a
Pallas TPU flash-attention kernel tiled for those shapes: 2048-row query
blocks, 512-row key/value blocks, an online softmax in float32 (running
max, running sum and accumulator in VMEM across the key blocks), key
blocks above the diagonal skipped (their index map repeats the last block
needed, so they are not even copied in). The sequence must be a multiple
of both blocks, which the kernel checks."""
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

BLOCK_Q, BLOCK_K = 2048, 512
LANES = 128  # the running max and sum are kept lane-replicated
MASKED = -1e30


def _flash_kernel(q_ref, k_ref, v_ref, o_ref, m_ref, l_ref, acc_ref, *, scale):
    i, j = pl.program_id(2), pl.program_id(3)

    @pl.when(j == 0)
    def _init():
        m_ref[...] = jnp.full_like(m_ref, MASKED)
        l_ref[...] = jnp.zeros_like(l_ref)
        acc_ref[...] = jnp.zeros_like(acc_ref)

    q_first, k_first = i * BLOCK_Q, j * BLOCK_K

    @pl.when(k_first < q_first + BLOCK_Q)  # a block with some key at or below the diagonal
    def _step():
        s = jax.lax.dot_general(q_ref[...], k_ref[...], (((1,), (1,)), ((), ())),
                                preferred_element_type=jnp.float32) * scale
        row = q_first + jax.lax.broadcasted_iota(jnp.int32, s.shape, 0)
        col = k_first + jax.lax.broadcasted_iota(jnp.int32, s.shape, 1)
        s = jnp.where(col <= row, s, MASKED)
        m_prev = m_ref[...]
        m_new = jnp.maximum(m_prev, jnp.max(s, axis=1, keepdims=True))
        alpha = jnp.exp(m_prev - m_new)
        p = jnp.exp(s - m_new[:, :1])
        l_ref[...] = alpha * l_ref[...] + jnp.sum(p, axis=1, keepdims=True)
        m_ref[...] = m_new
        pv = jnp.dot(p.astype(v_ref.dtype), v_ref[...], preferred_element_type=jnp.float32)
        acc_ref[...] = acc_ref[...] * alpha[:, :1] + pv

    @pl.when(j == pl.num_programs(3) - 1)
    def _finish():
        o_ref[...] = (acc_ref[...] / l_ref[...][:, :1]).astype(o_ref.dtype)


def _kv_block(b, h, i, j):
    # the last key block a query block needs; later steps repeat it (no copy)
    return (b, h, jnp.minimum(j, (i * BLOCK_Q + BLOCK_Q - 1) // BLOCK_K), 0)


def workload(query, key, value):
    b, h, s, d = query.shape
    if s % BLOCK_Q or s % BLOCK_K:
        raise ValueError("seq_len %d is not a multiple of the blocks (%d, %d)" % (s, BLOCK_Q, BLOCK_K))
    kernel = lambda *refs: _flash_kernel(*refs, scale=d ** -0.5)
    return pl.pallas_call(
        kernel,
        out_shape=jax.ShapeDtypeStruct(query.shape, query.dtype),
        grid=(b, h, s // BLOCK_Q, s // BLOCK_K),
        in_specs=[pl.BlockSpec((None, None, BLOCK_Q, d), lambda b, h, i, j: (b, h, i, 0)),
                  pl.BlockSpec((None, None, BLOCK_K, d), _kv_block),
                  pl.BlockSpec((None, None, BLOCK_K, d), _kv_block)],
        out_specs=pl.BlockSpec((None, None, BLOCK_Q, d), lambda b, h, i, j: (b, h, i, 0)),
        scratch_shapes=[pltpu.VMEM((BLOCK_Q, LANES), jnp.float32),
                        pltpu.VMEM((BLOCK_Q, LANES), jnp.float32),
                        pltpu.VMEM((BLOCK_Q, d), jnp.float32)],
        compiler_params=pltpu.CompilerParams(
            dimension_semantics=("parallel", "parallel", "parallel", "arbitrary"),
            vmem_limit_bytes=64 * 1024 * 1024),
    )(query, key, value)


computation = workload  # the MaxKernel layout's entry
