"""tiny_rmsnorm as a Pallas kernel that never ends on one case's shape
(HANG_COLS: the 5 x 7 test config): a stand-in for a kernel the
interpreter is too slow for on this CPU. Its other calls end, and are
correct; the run runs out of time. tests/lua/pallas_slow_test.lua makes
its twins by changing the constants below."""
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

OFF = 0.0  # a twin sets 0.5: its outputs are off too
HANG_COLS = 7  # the width of the inputs it never ends on (a twin: every width, -1)
GRID = 1  # grid steps that each compute the whole output again (a twin: 10**9, slow but never stuck)


def _kernel(x_ref, s_ref, o_ref):
    x = x_ref[...]
    inv = jax.lax.rsqrt(jnp.mean(x * x, axis=-1, keepdims=True) + 1e-5)
    o_ref[...] = x * inv * s_ref[...][None, :] + OFF


def _forever(x):
    # a loop whose condition stays true: c cycles through 0, 1, 2
    c = jax.lax.while_loop(lambda c: c < 5, lambda c: (c + 1) % 3, jnp.int32(0))
    return x + c.astype(x.dtype) * 0


def workload(x, scale):
    if x.shape[1] == HANG_COLS or HANG_COLS < 0:
        x = _forever(x)
    return pl.pallas_call(_kernel, grid=(GRID,), out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(x, scale)
