# Imports
import jax
import jax.numpy as jnp


# Initialization
def get_inputs(dtype=jnp.float32):
    key = jax.random.key(3)
    x = jax.random.normal(key, (8, 32), dtype=dtype)
    dynamic_args = [x]
    static_args = [2.0]
    return dynamic_args, static_args


# Computation
def computation(x, alpha):
    return jnp.maximum(x * alpha, 0.0)
