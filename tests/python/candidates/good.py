import jax.numpy as jnp


def workload(x, scale):
    inv = 1.0 / jnp.sqrt(jnp.mean(jnp.square(x), axis=-1, keepdims=True) + 1e-5)
    return (x * inv) * scale
