"""bf16_rowdot 0.4% too large: within its 1e-2 tolerance, far beyond the
reference's own error (a bug a loose tolerance hides)."""
import jax.numpy as jnp


def workload(x, w):
    return jnp.dot(x, w, preferred_element_type=jnp.float32) * 1.004
