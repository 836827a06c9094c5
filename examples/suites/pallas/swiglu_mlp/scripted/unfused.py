"""SwiGLU in two pallas_calls: the first writes h = silu(x w_gate) *
(x w_up) for a (token block, d_ff block) tile to HBM, the second
multiplies h by w_down with a float32 accumulator over d_ff. Correct, but
the (tokens, d_ff) intermediate makes a round trip through HBM: the slower
kernel."""
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

bt = 128
bf = 256


def _gate_up(x_ref, wg_ref, wu_ref, h_ref):
    x = x_ref[...]
    g = jnp.dot(x, wg_ref[...], preferred_element_type=jnp.float32)
    u = jnp.dot(x, wu_ref[...], preferred_element_type=jnp.float32)
    h_ref[...] = (jax.nn.silu(g) * u).astype(h_ref.dtype)


def _down(h_ref, wd_ref, o_ref, acc_ref):
    j = pl.program_id(1)

    @pl.when(j == 0)
    def _():
        acc_ref[...] = jnp.zeros_like(acc_ref)

    acc_ref[...] += jnp.dot(h_ref[...], wd_ref[...], preferred_element_type=jnp.float32)

    @pl.when(j == pl.num_programs(1) - 1)
    def _():
        o_ref[...] = acc_ref[...].astype(o_ref.dtype)


def workload(x, w_gate, w_up, w_down):
    tokens, d = x.shape
    f = w_gate.shape[1]
    h = pl.pallas_call(
        _gate_up,
        out_shape=jax.ShapeDtypeStruct((tokens, f), x.dtype),
        grid=(pl.cdiv(tokens, bt), f // bf),
        in_specs=[pl.BlockSpec((bt, d), lambda i, j: (i, 0)),
                  pl.BlockSpec((d, bf), lambda i, j: (0, j)),
                  pl.BlockSpec((d, bf), lambda i, j: (0, j))],
        out_specs=pl.BlockSpec((bt, bf), lambda i, j: (i, j)),
        compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel", "parallel")),
    )(x, w_gate, w_up)
    return pl.pallas_call(
        _down,
        out_shape=jax.ShapeDtypeStruct((tokens, d), x.dtype),
        grid=(pl.cdiv(tokens, bt), f // bf),
        in_specs=[pl.BlockSpec((bt, bf), lambda i, j: (i, j)),
                  pl.BlockSpec((bf, d), lambda i, j: (j, 0))],
        out_specs=pl.BlockSpec((bt, d), lambda i, j: (i, 0)),
        scratch_shapes=[pltpu.VMEM((bt, d), jnp.float32)],
        compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel", "arbitrary")),
    )(h, w_down)
