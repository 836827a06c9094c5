"""A candidate that allocates 1 GiB when imported (and keeps it): past a
harness memory limit below that, its evaluation is `unchecked` (reason
"memory"), never a crash. Otherwise the plain-JAX RMSNorm of good.py."""
import jax.numpy as jnp
import numpy as np

_HELD = np.ones(1 << 27)  # 1 GiB of float64, every page written


def workload(x, scale):
    inv = 1.0 / jnp.sqrt(jnp.mean(jnp.square(x), axis=-1, keepdims=True) + 1e-5 + 0 * _HELD[0])
    return (x * inv) * scale
