"""SwiGLU MLP as one pallas_call: a (tokens/bt, d_ff/bf) grid. Each step
takes a block of token rows and one d_ff slice of the gate, up and down
weights, applies silu(x w_gate) * (x w_up) in VMEM and adds its share of
the down projection to a float32 accumulator; the (tokens, d_ff)
intermediates never reach HBM. d_ff is the reduction axis (arbitrary)."""
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

# mk:tune bt = [128, 256]
# mk:tune bf = [128, 256]
bt = 128
bf = 256


def _kernel(x_ref, wg_ref, wu_ref, wd_ref, o_ref, acc_ref):
    j = pl.program_id(1)

    @pl.when(j == 0)
    def _():
        acc_ref[...] = jnp.zeros_like(acc_ref)

    x = x_ref[...]
    g = jnp.dot(x, wg_ref[...], preferred_element_type=jnp.float32)
    u = jnp.dot(x, wu_ref[...], preferred_element_type=jnp.float32)
    h = (jax.nn.silu(g) * u).astype(x.dtype)
    acc_ref[...] += jnp.dot(h, wd_ref[...], preferred_element_type=jnp.float32)

    @pl.when(j == pl.num_programs(1) - 1)
    def _():
        o_ref[...] = acc_ref[...].astype(o_ref.dtype)


def workload(x, w_gate, w_up, w_down):
    tokens, d = x.shape
    f = w_gate.shape[1]
    return pl.pallas_call(
        _kernel,
        out_shape=jax.ShapeDtypeStruct((tokens, d), x.dtype),
        grid=(pl.cdiv(tokens, bt), f // bf),
        in_specs=[pl.BlockSpec((bt, d), lambda i, j: (i, 0)),
                  pl.BlockSpec((d, bf), lambda i, j: (0, j)),
                  pl.BlockSpec((d, bf), lambda i, j: (0, j)),
                  pl.BlockSpec((bf, d), lambda i, j: (j, 0))],
        out_specs=pl.BlockSpec((bt, d), lambda i, j: (i, 0)),
        scratch_shapes=[pltpu.VMEM((bt, d), jnp.float32)],
        compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel", "arbitrary")),
    )(x, w_gate, w_up, w_down)
