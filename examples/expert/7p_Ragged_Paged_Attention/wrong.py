"""7p_Ragged_Paged_Attention's kernel (block sizes from the chip it runs on,
one async DMA a KV page, online softmax) WRONG on purpose: the causal
bound is off by one (`col <= position + 1`), so every prefill query also
sees the token after it; decode queries (the last token of their
sequence) are unaffected."""
import math

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

# device kind -> (query tokens per block, pages per KV block)
BLOCKS = {"TPU v5 lite": (128, 16), "TPU v5e": (128, 16), "TPU v6 lite": (256, 32), "TPU v6e": (256, 32),
          "TPU v5": (256, 16), "TPU v5p": (256, 16), "TPU v4": (128, 16)}
LANES = 128
MASKED = -0.7 * float(jnp.finfo(jnp.float32).max)


def _blocks():
    kind = jax.devices()[0].device_kind
    if kind not in BLOCKS:
        raise ValueError("Unsupported TPU device kind: %s" % kind)
    block_t, pages = BLOCKS[kind]
    if pltpu.get_tpu_info().vmem_capacity_bytes < 64 * 1024 * 1024:
        pages //= 2  # half the KV block where VMEM is small
    return block_t, pages


def _rpa_kernel(kv_lens_ref, pages_ref, cu_ref, lo_ref, hi_ref, q_ref, kv_hbm, o_ref,
                kv_buf, sem, m_ref, l_ref, acc_ref, *, block_t, pages, page_size, scale):
    t = pl.program_id(0)
    hq, block_k, combined = q_ref.shape[0], pages * page_size, kv_buf.shape[0]
    group, pages_per_seq = hq // (combined // 2), pages_ref.shape[1]
    m_ref[...] = jnp.full_like(m_ref, MASKED)
    l_ref[...] = jnp.zeros_like(l_ref)
    acc_ref[...] = jnp.zeros_like(acc_ref)
    first_row = t * block_t
    row = first_row + jax.lax.broadcasted_iota(jnp.int32, (block_t, block_k), 0)

    def sequence(s, carry):
        q_start, q_end, kv_len = cu_ref[s], cu_ref[s + 1], kv_lens_ref[s]
        before = kv_len - (q_end - q_start)  # KV tokens before the sequence's first query
        last_row = jnp.minimum(q_end, first_row + block_t) - 1
        n_kv = (before + last_row - q_start) // block_k + 1

        def kv_block(kb, carry):
            # one DMA a page: its K and V of every KV head
            copies = [pltpu.make_async_copy(
                kv_hbm.at[pages_ref[s, jnp.minimum(kb * pages + p, pages_per_seq - 1)]],
                kv_buf.at[:, pl.ds(p * page_size, page_size)], sem.at[0]) for p in range(pages)]
            for c in copies:
                c.start()
            for c in copies:
                c.wait()
            col = kb * block_k + jax.lax.broadcasted_iota(jnp.int32, (block_t, block_k), 1)
            valid = (row >= q_start) & (row < q_end) & (col <= before + row - q_start + 1) & (col < kv_len)
            for h in range(hq):
                k, v = kv_buf[2 * (h // group)], kv_buf[2 * (h // group) + 1]
                sc = jax.lax.dot_general(q_ref[h], k, (((1,), (1,)), ((), ())),
                                         preferred_element_type=jnp.float32) * scale
                sc = jnp.where(valid, sc, MASKED)
                m_prev = m_ref[h]
                m_new = jnp.maximum(m_prev, jnp.max(sc, axis=1, keepdims=True))
                alpha = jnp.exp(m_prev - m_new)
                p_ = jnp.where(valid, jnp.exp(sc - m_new[:, :1]), 0.0)
                l_ref[h] = alpha * l_ref[h] + jnp.sum(p_, axis=1, keepdims=True)
                m_ref[h] = m_new
                pv = jnp.dot(p_.astype(v.dtype), v, preferred_element_type=jnp.float32)
                acc_ref[h] = acc_ref[h] * alpha[:, :1] + pv
            return carry

        return jax.lax.fori_loop(0, n_kv, kv_block, carry)

    jax.lax.fori_loop(lo_ref[t], hi_ref[t], sequence, 0)
    for h in range(hq):
        l = l_ref[h][:, :1]
        o_ref[h] = jnp.where(l > 0, acc_ref[h] / jnp.where(l > 0, l, 1.0), 0.0).astype(o_ref.dtype)


def workload(queries, kv_pages, kv_lens, page_indices, cu_q_lens, num_seqs):
    block_t, pages = _blocks()
    tokens, hq, d = queries.shape
    _, page_size, combined, _ = kv_pages.shape
    if tokens % block_t:
        raise ValueError("%d query tokens are not a multiple of the token block %d" % (tokens, block_t))
    pages = min(pages, page_indices.shape[1])
    # the sequences each token block holds: [lo, hi) of the active ones
    starts = jnp.arange(tokens // block_t, dtype=jnp.int32) * block_t
    n = jnp.minimum(num_seqs[0], kv_lens.shape[0])  # the active sequences come first
    lo = jnp.minimum(jnp.searchsorted(cu_q_lens[1:], starts, side="right"), n)  # first ending after start
    hi = jnp.minimum(jnp.searchsorted(cu_q_lens[:-1], starts + block_t - 1, side="right"), n)
    hi = jnp.maximum(hi, lo).astype(jnp.int32)
    q_t = queries.transpose(1, 0, 2)  # heads first: each head's queries are one tile
    kv_t = kv_pages.transpose(0, 2, 1, 3)  # (pages, K/V heads interleaved, page_size, d)
    kernel = lambda *refs: _rpa_kernel(*refs, block_t=block_t, pages=pages, page_size=page_size,
                                       scale=1.0 / math.sqrt(d))
    q_spec = pl.BlockSpec((hq, block_t, d), lambda t, *_: (0, t, 0))
    out = pl.pallas_call(
        kernel,
        out_shape=jax.ShapeDtypeStruct(q_t.shape, queries.dtype),
        grid_spec=pltpu.PrefetchScalarGridSpec(
            num_scalar_prefetch=5,
            grid=(tokens // block_t,),
            in_specs=[q_spec, pl.BlockSpec(memory_space=pl.ANY)],
            out_specs=q_spec,
            scratch_shapes=[pltpu.VMEM((combined, pages * page_size, d), kv_pages.dtype),
                            pltpu.SemaphoreType.DMA((1,)),
                            pltpu.VMEM((hq, block_t, LANES), jnp.float32),
                            pltpu.VMEM((hq, block_t, LANES), jnp.float32),
                            pltpu.VMEM((hq, block_t, d), jnp.float32)]),
        compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel",)),
    )(kv_lens, page_indices, cu_q_lens, lo.astype(jnp.int32), hi, q_t, kv_t)
    return out.transpose(1, 0, 2)
