import jax.numpy as jnp

# mk:tune eps_scale = [1, 10000]
eps_scale = 1


def workload(x, scale):
    return x / jnp.sqrt(jnp.mean(x * x, axis=-1, keepdims=True) + 1e-5 * eps_scale) * scale
