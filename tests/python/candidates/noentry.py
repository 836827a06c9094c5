import jax.numpy as jnp


def kernel(x, scale):
    return x
