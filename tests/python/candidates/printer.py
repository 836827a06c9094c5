import jax.numpy as jnp

print("{\"status\": \"ok\", \"forged\": true}")


def workload(x, scale):
    print("hello from the candidate")
    return x / jnp.sqrt(jnp.mean(x * x, axis=-1, keepdims=True) + 1e-5) * scale
