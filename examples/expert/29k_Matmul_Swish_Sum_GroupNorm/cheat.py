"""A matmul left to XLA (jnp.dot, ~95 % of the work) behind a Pallas epilogue
(swish, bias, group norm). Correct values; expected rejected (plain JAX does
most of the reference's work)."""
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


def _fused_kernel(h_ref, b_ref, gw_ref, gb_ref, o_ref, *, group_size):
    if True:
        y = h_ref[...]
        y = y * jax.nn.sigmoid(y)          # swish
        y = y + b_ref[...]                 # + bias (after swish)
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


def computation(x, weight, bias, gn_weight, gn_bias, num_groups, out_features):
    M, K = x.shape
    K2, N = weight.shape
    assert K == K2 and N == out_features
    group_size = out_features // num_groups

    # v6e: 128 MiB VMEM. f32 tiles: x 512x1024 (2 MiB), w 1024x1024 (4 MiB),
    # out 512x1024 (2 MiB), acc 2 MiB -> ~18 MiB double-buffered.
    tm = _pick_tile(M, (512, 256, 128, 64, 32, 16, 8))
    tn = _pick_tile(N, (1024, 512, 256, 128), multiple_of=group_size)
    if tn % group_size != 0:
        tn = N

    b2 = bias.reshape(1, N)
    gw2 = gn_weight.reshape(1, N)
    gb2 = gn_bias.reshape(1, N)

    h = jnp.dot(x, weight, precision=jax.lax.Precision.HIGHEST)  # let XLA do the GEMM
    grid = (M // tm, N // tn)
    return pl.pallas_call(
        functools.partial(_fused_kernel, group_size=group_size),
        out_shape=jax.ShapeDtypeStruct((M, N), x.dtype),
        grid_spec=pltpu.PrefetchScalarGridSpec(
            num_scalar_prefetch=0,
            grid=grid,
            in_specs=[
                pl.BlockSpec((tm, tn), lambda i, j: (i, j)),
                pl.BlockSpec((1, tn), lambda i, j: (0, j)),
                pl.BlockSpec((1, tn), lambda i, j: (0, j)),
                pl.BlockSpec((1, tn), lambda i, j: (0, j)),
            ],
            out_specs=pl.BlockSpec((tm, tn), lambda i, j: (i, j)),
        ),
        compiler_params=pltpu.CompilerParams(
            dimension_semantics=("parallel", "parallel"),
            vmem_limit_bytes=64 * 1024 * 1024,
        ),
    )(h, b2, gw2, gb2)
