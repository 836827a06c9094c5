"""A matmul whose own sizes (1024 x 512 by 512 x 1024) are larger than the
CPU test scale (256): kernels written for the task's sizes use blocks of
512, which leave an empty grid at the test scale."""
import jax
import jax.numpy as jnp

CONFIG = {'name': 'big_blocks', 'm': 1024, 'k': 512, 'n': 1024, 'atol': 1e-3, 'rtol': 1e-3}


def create_inputs(dtype=jnp.float32):
    k1, k2 = jax.random.split(jax.random.key(7), 2)
    a = jax.random.normal(k1, (CONFIG['m'], CONFIG['k']), dtype=dtype)
    b = jax.random.normal(k2, (CONFIG['k'], CONFIG['n']), dtype=dtype) * 0.05
    return a, b


def workload(a, b):
    return jnp.dot(a, b, preferred_element_type=jnp.float32)


def get_flops():
    return 2 * CONFIG['m'] * CONFIG['k'] * CONFIG['n']
