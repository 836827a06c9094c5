"""Grouped matmul: the group sizes are an array and the rows per group a
Python int among the inputs, used as a static slice size."""

import jax
import jax.numpy as jnp

CONFIG = {'name': 'scale_groups', 'groups': 16, 'rows': 4096, 'k': 1024, 'n': 512}


def create_inputs(dtype=jnp.float32):
    g, m = CONFIG['groups'], CONFIG['rows']
    k1, k2 = jax.random.split(jax.random.key(11))
    lhs = jax.random.normal(k1, (m, CONFIG['k']), dtype=dtype)
    rhs = jax.random.normal(k2, (g, CONFIG['k'], CONFIG['n']), dtype=dtype) * 0.05
    per_group = m // g
    return lhs, rhs, jnp.full((g,), per_group, dtype=jnp.int32), per_group


def workload(lhs, rhs, group_sizes, per_group):
    starts = jnp.cumsum(group_sizes) - group_sizes

    def one(i):
        rows = jax.lax.dynamic_slice(lhs, (starts[i], 0), (per_group, lhs.shape[1]))
        return rows @ rhs[i]
    return jax.vmap(one)(jnp.arange(rhs.shape[0])).reshape(-1, rhs.shape[2])
