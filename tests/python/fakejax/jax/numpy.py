"""jax.numpy stand-in: numpy itself, plus the JAX-only spellings used."""
import numpy as _np


def __getattr__(name):
    # every other jnp.<name> is numpy's (PEP 562 module attribute)
    return getattr(_np, name)


float32 = _np.float32
int32 = _np.int32


def array(x, copy=True, dtype=None):
    return _np.array(x, copy=copy, dtype=dtype)


def asarray(x, dtype=None):
    return _np.asarray(x, dtype=dtype)


def zeros_like(x, dtype=None):
    return _np.zeros_like(x, dtype=dtype)
