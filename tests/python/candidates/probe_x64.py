"""Correct in a process of its own; wrong (every output + 1) in a process
where an earlier candidate turned JAX's 64-bit mode on (leak_x64.py):
isolation tests."""
import jax
import jax.numpy as jnp

LEAKED = bool(jax.config.jax_enable_x64)


def workload(x, scale):
    out = x / jnp.sqrt(jnp.mean(x * x, axis=-1, keepdims=True) + 1e-5) * scale
    return out + 1.0 if LEAKED else out
