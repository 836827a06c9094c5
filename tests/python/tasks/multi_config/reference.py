# Imports
import jax
import jax.numpy as jnp


# Initialization
def get_inputs(dtype=jnp.float32):
    # one (dynamic, static) pair per configuration, as MaxKernel's
    # multi-configuration tasks return them: a single row (decode), many
    # rows (prefill) and a row count no block of 8 divides
    configs = [
        (1, 512),
        (256, 512),
        (7, 384),
    ]
    key = jax.random.key(11)
    out = []
    for rows, width in configs:
        key, k1, k2 = jax.random.split(key, 3)
        x = jax.random.normal(k1, (rows, width), dtype=dtype)
        w = 1.0 + 0.1 * jax.random.normal(k2, (width,), dtype=dtype)
        out.append(([x, w], [1e-6]))
    return out


# Computation
def computation(x, w, eps):
    ms = jnp.mean(x * x, axis=-1, keepdims=True)
    return x * jax.lax.rsqrt(ms + eps) * w
