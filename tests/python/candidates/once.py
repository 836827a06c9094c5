import jax.numpy as jnp

calls = [0]


def workload(x, scale):
    # Does the work on its first call only (a cheat the repeat check catches
    # where Python runs per call; under jit the trace runs once anyway).
    calls[0] += 1
    if calls[0] > 2:
        return jnp.zeros_like(x) + 1.0
    return x / jnp.sqrt(jnp.mean(x * x, axis=-1, keepdims=True) + 1e-5) * scale
