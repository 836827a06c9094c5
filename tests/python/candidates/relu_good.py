import jax.numpy as jnp


def computation(x, alpha):
    y = x * alpha
    return jnp.where(y > 0, y, 0.0)
