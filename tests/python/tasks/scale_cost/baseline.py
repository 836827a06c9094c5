"""Sizes written in create_inputs, as a convolution task writes them: at
the task's own sizes one call costs more than the FLOP budget, and making
the inputs goes through an intermediate eight times their size (1 GiB).
The cost is counted from shapes, so that attempt makes nothing."""

import jax
import jax.numpy as jnp

CONFIG = {'name': 'scale_cost'}


def create_inputs(dtype=jnp.float32):
    k1, k2 = jax.random.split(jax.random.key(7))
    batch, chans, n = 128, 64, 64
    noise = jax.random.uniform(k1, (batch, chans, n, n, 8), dtype=dtype)
    x = jnp.mean(noise, axis=-1)
    w = jax.random.normal(k2, (chans, chans), dtype=dtype) * 0.1
    return x, w


def workload(x, w):
    # a 1x1 convolution over (n, n) planes: 2 * batch * chans^2 * n^2 FLOPs
    return jnp.tanh(jnp.einsum('bchw,cd->bdhw', x, w))
