"""A cheat: keeps its first answer on the host (a callback with a module-level
memo) and hands it back on every later call, whatever the inputs."""
import jax
import jax.numpy as jnp
import numpy as np

_memo = []


def _remember(out):
    if not _memo:
        _memo.append(np.asarray(out))
    return _memo[0]


def workload(x, scale):
    ms = jnp.mean(x * x, axis=-1, keepdims=True)
    out = x / jnp.sqrt(ms + 1e-5) * scale
    return jax.pure_callback(_remember, jax.ShapeDtypeStruct(out.shape, out.dtype), out)
