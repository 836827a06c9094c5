"""Correct, and it changes JAX's process-wide state when imported (64-bit
mode on): a process that ran it must run no other candidate (isolation
tests; probe_x64.py is the candidate that would notice)."""
import jax
import jax.numpy as jnp

jax.config.update("jax_enable_x64", True)


def workload(x, scale):
    inv = 1.0 / jnp.sqrt(jnp.mean(jnp.square(x), axis=-1, keepdims=True) + 1e-5)
    return ((x * inv) * scale).astype(x.dtype)
