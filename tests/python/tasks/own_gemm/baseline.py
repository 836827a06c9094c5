"""A matrix product at its own sizes (XLA counts 0.1 GB for a call) that
no split into equal parts can compute: the one axis position every array
has is A's rows but B's contraction. Frozen at its own sizes under a
memory limit of 830 MiB, the engine's estimate (chunked.estimate) is
over what a process may hold, no split checks out, and XLA's own count
fits: the reference runs whole, with a warning; under 700 MiB it is
refused."""

import jax
import jax.numpy as jnp

CONFIG = {'name': 'own_gemm', 'M': 2896, 'K': 2896, 'N': 2896}


def create_inputs(dtype=jnp.float32):
    k1, k2 = jax.random.split(jax.random.key(3))
    a = jax.random.normal(k1, (CONFIG['M'], CONFIG['K']), dtype=dtype)
    b = jax.random.normal(k2, (CONFIG['K'], CONFIG['N']), dtype=dtype) * CONFIG['K'] ** -0.5
    return a, b


def workload(a, b):
    return a @ b
