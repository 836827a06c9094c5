"""multi_config's RMSNorm with the last row left at zero when the row count
is odd and above one: only its third configuration (7 rows) catches it."""
import jax
import jax.numpy as jnp


def computation(x, w, eps):
    ms = jnp.mean(x * x, axis=-1, keepdims=True)
    out = x * jax.lax.rsqrt(ms + eps) * w
    rows = x.shape[0]
    if rows > 1 and rows % 2 == 1:
        out = out.at[rows - 1].set(0.0)
    return out
