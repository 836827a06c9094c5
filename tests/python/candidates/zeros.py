import jax.numpy as jnp


def workload(x, scale):
    return jnp.zeros_like(x)
