"""Layer norm with an affine weight and bias the inputs make constant (ones
and zeros, as a freshly initialised norm layer's are), and a third constant
input the computation ignores. A kernel that drops the weight and bias is
right on such inputs: the held-out cases vary the constant inputs the output
depends on (gamma, beta), not the one it ignores."""

import jax
import jax.numpy as jnp

CONFIG = {'rows': 16, 'cols': 128}


def create_inputs(dtype=jnp.float32):
    key = jax.random.key(4)
    x = jax.random.normal(key, (CONFIG['rows'], CONFIG['cols']), dtype=dtype)
    gamma = jnp.ones((CONFIG['cols'],), dtype=dtype)
    beta = jnp.zeros((CONFIG['cols'],), dtype=dtype)
    unused = jnp.ones((CONFIG['cols'],), dtype=dtype)
    return x, gamma, beta, unused


def workload(x, gamma, beta, unused):
    mean = jnp.mean(x, axis=-1, keepdims=True)
    var = jnp.mean(jnp.square(x - mean), axis=-1, keepdims=True)
    return (x - mean) / jnp.sqrt(var + 1e-5) * gamma + beta
