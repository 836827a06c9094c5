"""multi_config's RMSNorm 0.1% too large: within the 1e-2 tolerance of its
second and third configurations, outside the 1e-4 of its first."""
import jax
import jax.numpy as jnp


def computation(x, w, eps):
    ms = jnp.mean(x * x, axis=-1, keepdims=True)
    return x * jax.lax.rsqrt(ms + eps) * w * 1.001
