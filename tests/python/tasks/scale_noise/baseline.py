"""A group norm followed by a mean over all but the batch (JAXBench 25k's
shape of computation): every sample's output is mean(beta) up to float
rounding, whatever x is. Compared exactly, the rounding made the output
look varied and dependent on x; within the suite's own tolerance it is
constant at every size, so it is frozen with a warning after three
scales say so."""

import jax
import jax.numpy as jnp

CONFIG = {'name': 'scale_noise', 'batch': 512, 'channels': 64, 'length': 1024}


def create_inputs(dtype=jnp.float32):
    k1, k2 = jax.random.split(jax.random.key(5))
    x = jax.random.uniform(k1, (CONFIG['batch'], CONFIG['channels'], CONFIG['length']), dtype=dtype)
    beta = jax.random.normal(k2, (CONFIG['channels'],), dtype=dtype) * 0.02
    return x, beta


def workload(x, beta):
    n, c, length = x.shape
    h = x.reshape(n, 8, c // 8, length)
    h = (h - jnp.mean(h, axis=(2, 3), keepdims=True)) / jnp.sqrt(jnp.var(h, axis=(2, 3), keepdims=True) + 1e-5)
    h = h.reshape(n, c, length) + beta[None, :, None]
    return jnp.mean(h, axis=(1, 2))
