"""The task's own file as a candidate, JAXBench layout: CONFIG, create_inputs,
a Pallas workload, get_flops, and the benchmark() helper and __main__ block
that import time and json. Only workload runs."""
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

CONFIG = {'name': 'tiny_rmsnorm_cfg', 'rows': 16, 'cols': 128, 'eps': 1e-5}


def create_inputs(dtype=jnp.float32):
    k1, k2 = jax.random.split(jax.random.key(0), 2)
    return (jax.random.normal(k1, (CONFIG['rows'], CONFIG['cols']), dtype=dtype),
            jax.random.normal(k2, (CONFIG['cols'],), dtype=dtype))


def _kernel(x_ref, s_ref, o_ref):
    x = x_ref[...]
    o_ref[...] = x * jax.lax.rsqrt(jnp.mean(x * x, axis=-1, keepdims=True) + CONFIG['eps']) * s_ref[...]


def workload(x, scale):
    rows, cols = x.shape
    return pl.pallas_call(
        _kernel,
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
        grid=(pl.cdiv(rows, 8),),
        in_specs=[pl.BlockSpec((8, cols), lambda i: (i, 0)), pl.BlockSpec((1, cols), lambda i: (0, 0))],
        out_specs=pl.BlockSpec((8, cols), lambda i: (i, 0)),
    )(x, scale.reshape(1, cols))


def get_flops():
    return 4 * CONFIG['rows'] * CONFIG['cols']


def benchmark(num_iters=10):
    import time
    inputs = create_inputs()
    fn = jax.jit(workload)
    fn(*inputs).block_until_ready()
    t0 = time.perf_counter()
    for _ in range(num_iters):
        fn(*inputs).block_until_ready()
    return {'name': CONFIG['name'], 'time_ms': (time.perf_counter() - t0) * 1000 / num_iters}


if __name__ == '__main__':
    import json
    print(json.dumps(benchmark()))
