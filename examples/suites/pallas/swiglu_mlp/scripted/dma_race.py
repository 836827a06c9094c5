"""dma.py with the wait after the w_down scratch is read: the down
projection uses the copy's destination while the DMA may still be writing
it. Plain interpret mode copies at once and passes; TPU interpret mode
reports the race."""
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

bt = 128
bf = 256


def _kernel(x_ref, wg_ref, wu_ref, wd_ref, o_ref, acc_ref, wd_buf, sem):
    j = pl.program_id(1)
    copy = pltpu.make_async_copy(wd_ref, wd_buf, sem)
    copy.start()

    @pl.when(j == 0)
    def _():
        acc_ref[...] = jnp.zeros_like(acc_ref)

    x = x_ref[...]
    g = jnp.dot(x, wg_ref[...], preferred_element_type=jnp.float32)
    u = jnp.dot(x, wu_ref[...], preferred_element_type=jnp.float32)
    h = (jax.nn.silu(g) * u).astype(x.dtype)
    acc_ref[...] += jnp.dot(h, wd_buf[...], preferred_element_type=jnp.float32)  # read before the wait
    copy.wait()

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
        scratch_shapes=[pltpu.VMEM((bt, d), jnp.float32), pltpu.VMEM((bf, d), w_down.dtype),
                        pltpu.SemaphoreType.DMA(())],
        compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel", "arbitrary")),
    )(x, w_gate, w_up, w_down)
