import jax.numpy as jnp


def workload(x, scale):
    return x * jnp.nan
