"""Low-rank projection whose contracted width is the sum of two CONFIG
entries (latent + pos): the sizes must shrink together, and the workload
reads CONFIG while it runs, so the case's CONFIG must hold then too."""

import jax
import jax.numpy as jnp

CONFIG = {'name': 'scale_related', 'batch': 2, 'tokens': 1024, 'width': 2048, 'latent': 512, 'pos': 64}


def create_inputs(dtype=jnp.float32):
    c = CONFIG
    k1, k2, k3 = jax.random.split(jax.random.key(7), 3)
    x = jax.random.normal(k1, (c['batch'], c['tokens'], c['width']), dtype=dtype)
    down = jax.random.normal(k2, (c['width'], c['latent'] + c['pos']), dtype=dtype) * 0.05
    up = jax.random.normal(k3, (c['latent'], c['width']), dtype=dtype) * 0.05
    return x, down, up


def workload(x, down, up):
    h = jnp.dot(x, down)
    lat, pos = h[..., :CONFIG['latent']], h[..., CONFIG['latent']:]
    return jnp.dot(lat, up) * jnp.tanh(jnp.sum(pos, axis=-1, keepdims=True))
