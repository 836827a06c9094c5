"""The expert's matmul with manual double-buffered DMAs that starts tile k+2's
copy into the slot still being read: a race from the second K step on, so
none at the test scale (K = 128: one step). Expected incorrect (race), found
by the held-out confirmation at a larger scale."""
import functools
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu


_EPS = 1e-5


def _pick_tile(dim, candidates, multiple_of=1):
    """Largest candidate that divides dim (and is a multiple of multiple_of); else full dim."""
    for c in candidates:
        if c <= dim and dim % c == 0 and c % multiple_of == 0:
            return c
    return dim


def _group_matrices(tn, group_size):
    """One-hot membership matrices: G (tn, ng) and G^T (ng, tn), built from iotas."""
    ng = tn // group_size
    c = jax.lax.broadcasted_iota(jnp.int32, (tn, ng), 0)
    g = jax.lax.broadcasted_iota(jnp.int32, (tn, ng), 1)
    G = ((c >= g * group_size) & (c < (g + 1) * group_size)).astype(jnp.float32)
    gt = jax.lax.broadcasted_iota(jnp.int32, (ng, tn), 0)
    ct = jax.lax.broadcasted_iota(jnp.int32, (ng, tn), 1)
    GT = ((ct >= gt * group_size) & (ct < (gt + 1) * group_size)).astype(jnp.float32)
    return G, GT


def _epilogue(acc, b_ref, gw_ref, gb_ref, o_ref, group_size):
    y = acc
    y = y * jax.nn.sigmoid(y)
    y = y + b_ref[...]
    tn = y.shape[1]
    G, GT = _group_matrices(tn, group_size)
    hi = jax.lax.Precision.HIGHEST
    inv_gs = 1.0 / group_size
    mean_g = jnp.dot(y, G, preferred_element_type=jnp.float32, precision=hi) * inv_gs
    mean = jnp.dot(mean_g, GT, preferred_element_type=jnp.float32, precision=hi)
    d = y - mean
    var_g = jnp.dot(d * d, G, preferred_element_type=jnp.float32, precision=hi) * inv_gs
    rstd_g = jax.lax.rsqrt(var_g + _EPS)
    rstd = jnp.dot(rstd_g, GT, preferred_element_type=jnp.float32, precision=hi)
    o_ref[...] = (d * rstd * gw_ref[...] + gb_ref[...]).astype(o_ref.dtype)


def _dma_kernel(x_hbm, w_hbm, b_ref, gw_ref, gb_ref, o_ref,
                xbuf, wbuf, sem, acc_ref, *, tm, tn, tk, nk, group_size):
    i = pl.program_id(0)
    j = pl.program_id(1)

    def copies(kk, slot):
        cx = pltpu.make_async_copy(
            x_hbm.at[pl.ds(i * tm, tm), pl.ds(kk * tk, tk)], xbuf.at[slot], sem.at[0, slot])
        cw = pltpu.make_async_copy(
            w_hbm.at[pl.ds(kk * tk, tk), pl.ds(j * tn, tn)], wbuf.at[slot], sem.at[1, slot])
        return cx, cw

    def start(kk, slot):
        cx, cw = copies(kk, slot)
        cx.start()
        cw.start()

    def wait(kk, slot):
        cx, cw = copies(kk, slot)
        cx.wait()
        cw.wait()

    acc_ref[...] = jnp.zeros_like(acc_ref)
    start(0, 0)

    @pl.when(nk > 1)
    def _():
        start(1, 1)

    def body(kk, carry):
        slot = kk % 2
        wait(kk, slot)

        @pl.when(kk + 2 < nk)
        def _():
            start(kk + 2, slot)   # deeper prefetch: keep two copies in flight

        acc_ref[...] += jnp.dot(xbuf[slot], wbuf[slot],
                                preferred_element_type=jnp.float32,
                                precision=jax.lax.Precision.HIGHEST)
        return carry

    jax.lax.fori_loop(0, nk, body, 0)

    _epilogue(acc_ref[...], b_ref, gw_ref, gb_ref, o_ref, group_size)


def computation(x, weight, bias, gn_weight, gn_bias, num_groups, out_features):
    M, K = x.shape
    K2, N = weight.shape
    assert K == K2 and N == out_features
    group_size = out_features // num_groups

    # v6e tiles, manually double-buffered over K: x 2x(512x512) + w 2x(512x1024)
    # + out 2x(512x1024) + acc (512x1024), all f32 -> ~16 MiB of VMEM.
    tm = _pick_tile(M, (512, 256, 128, 64, 32, 16, 8))
    tn = _pick_tile(N, (1024, 512, 256, 128), multiple_of=group_size)
    if tn % group_size != 0:
        tn = N
    # at least 4 K steps so the DMA pipeline has something to overlap
    tk = next((c for c in (512, 256, 128) if K % c == 0 and K // c >= 4),
              _pick_tile(K, (512, 256, 128)))
    nk = K // tk

    b2 = bias.reshape(1, N)
    gw2 = gn_weight.reshape(1, N)
    gb2 = gn_bias.reshape(1, N)

    kernel = functools.partial(_dma_kernel, tm=tm, tn=tn, tk=tk, nk=nk,
                               group_size=group_size)
    return pl.pallas_call(
        kernel,
        out_shape=jax.ShapeDtypeStruct((M, N), x.dtype),
        grid_spec=pltpu.PrefetchScalarGridSpec(
            num_scalar_prefetch=0,
            grid=(M // tm, N // tn),
            in_specs=[
                pl.BlockSpec(memory_space=pl.ANY),
                pl.BlockSpec(memory_space=pl.ANY),
                pl.BlockSpec((1, tn), lambda i, j: (0, j)),
                pl.BlockSpec((1, tn), lambda i, j: (0, j)),
                pl.BlockSpec((1, tn), lambda i, j: (0, j)),
            ],
            out_specs=pl.BlockSpec((tm, tn), lambda i, j: (i, j)),
            scratch_shapes=[
                pltpu.VMEM((2, tm, tk), jnp.float32),
                pltpu.VMEM((2, tk, tn), jnp.float32),
                pltpu.SemaphoreType.DMA((2, 2)),
                pltpu.VMEM((tm, tn), jnp.float32),
            ],
        ),
        compiler_params=pltpu.CompilerParams(
            dimension_semantics=("parallel", "parallel"),
            vmem_limit_bytes=64 * 1024 * 1024,
        ),
    )(x, weight, b2, gw2, gb2)
