import jax.numpy as jnp


def workload(x, scale):
    return x / jnp.sqrt(jnp.mean(x * x, axis=-1, keepdims=True) + 1e-1) * scale
