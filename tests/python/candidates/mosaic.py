import jax.numpy as jnp


# The numpy stand-in fails .compile() like Mosaic when the test sets
# MK_FAKE_COMPILE_ERROR; the candidate itself is ordinary.
def workload(x, scale):
    return x * scale
