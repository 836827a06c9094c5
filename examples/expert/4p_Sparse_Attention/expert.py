"""4p_Sparse_Attention (q: 4 x 64 x 4096 x 128, k and v: 4 x 8 x 4096 x 128
bf16, causal, grouped queries) as a block-sparse ("splash"-style) Pallas
TPU kernel. The mask is turned, once while tracing, into per-block tables
with numpy: which 1024-column key blocks of each 512-row query block have
any nonzero, whether each is full or partial, and the distinct partial
mask blocks. The grid walks only the listed key blocks (the tables are
scalar-prefetched: the key/value index maps read them), applies a partial
block's mask from the stored mask blocks, and keeps an online softmax in
float32. The scores are not scaled: the task's q already is."""
import functools

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

BLOCK_Q, BLOCK_K = 512, 1024
LANES = 128
MASKED = -1e30
SKIP, PARTIAL, FULL = 0, 1, 2


@functools.lru_cache(maxsize=None)
def _mask_tables(seq_len):
    """(kv_block, kind, mask_index) tables of shape (query blocks, steps)
    and the distinct partial mask blocks, for the causal mask."""
    mask = np.tril(np.ones((seq_len, seq_len), dtype=np.bool_))
    blocks = mask.reshape(seq_len // BLOCK_Q, BLOCK_Q, seq_len // BLOCK_K, BLOCK_K).transpose(0, 2, 1, 3)
    any_nz, all_nz = blocks.any(axis=(2, 3)), blocks.all(axis=(2, 3))
    steps = int(any_nz.sum(axis=1).max())
    nq = any_nz.shape[0]
    kv_block = np.zeros((nq, steps), np.int32)
    kind = np.full((nq, steps), SKIP, np.int32)
    mask_index = np.zeros((nq, steps), np.int32)
    partial, seen = [], {}
    for i in range(nq):
        for n, j in enumerate(np.flatnonzero(any_nz[i])):
            kv_block[i, n], kind[i, n] = j, FULL if all_nz[i, j] else PARTIAL
            if not all_nz[i, j]:
                key = blocks[i, j].tobytes()
                if key not in seen:
                    seen[key] = len(partial)
                    partial.append(blocks[i, j])
                mask_index[i, n] = seen[key]
        kv_block[i, any_nz[i].sum():] = kv_block[i, max(any_nz[i].sum() - 1, 0)]  # repeat: no copy
    masks = np.stack(partial or [np.ones((BLOCK_Q, BLOCK_K), np.bool_)]).astype(np.int32)
    return kv_block, kind, mask_index, masks


def _splash_kernel(kv_block_ref, kind_ref, mask_index_ref, q_ref, k_ref, v_ref, mask_ref, o_ref,
                   m_ref, l_ref, acc_ref):
    i, j = pl.program_id(2), pl.program_id(3)
    kind = kind_ref[i, j]

    @pl.when(j == 0)
    def _init():
        m_ref[...] = jnp.full_like(m_ref, MASKED)
        l_ref[...] = jnp.zeros_like(l_ref)
        acc_ref[...] = jnp.zeros_like(acc_ref)

    @pl.when(kind != SKIP)
    def _step():
        s = jax.lax.dot_general(q_ref[...], k_ref[...], (((1,), (1,)), ((), ())),
                                preferred_element_type=jnp.float32)
        s = jnp.where((mask_ref[...] != 0) | (kind == FULL), s, MASKED)
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


def workload(q, k, v):
    b, hq, s, d = q.shape
    group = hq // k.shape[1]
    kv_block, kind, mask_index, masks = _mask_tables(s)
    q_spec = pl.BlockSpec((None, None, BLOCK_Q, d), lambda b, h, i, j, kvb, kd, mi: (b, h, i, 0))
    kv_spec = pl.BlockSpec((None, None, BLOCK_K, d), lambda b, h, i, j, kvb, kd, mi: (b, h // group, kvb[i, j], 0))
    mask_spec = pl.BlockSpec((None, BLOCK_Q, BLOCK_K), lambda b, h, i, j, kvb, kd, mi: (mi[i, j], 0, 0))
    grid_spec = pltpu.PrefetchScalarGridSpec(
        num_scalar_prefetch=3,
        grid=(b, hq, kv_block.shape[0], kv_block.shape[1]),
        in_specs=[q_spec, kv_spec, kv_spec, mask_spec],
        out_specs=q_spec,
        scratch_shapes=[pltpu.VMEM((BLOCK_Q, LANES), jnp.float32),
                        pltpu.VMEM((BLOCK_Q, LANES), jnp.float32),
                        pltpu.VMEM((BLOCK_Q, d), jnp.float32)])
    return pl.pallas_call(
        _splash_kernel,
        out_shape=jax.ShapeDtypeStruct(q.shape, q.dtype),
        grid_spec=grid_spec,
        compiler_params=pltpu.CompilerParams(
            dimension_semantics=("parallel", "parallel", "parallel", "arbitrary")),
    )(jnp.asarray(kv_block), jnp.asarray(kind), jnp.asarray(mask_index), q, k, v, jnp.asarray(masks))
