"""jax.numpy stand-in: numpy itself, plus the JAX-only spellings used."""
from numpy import *  # noqa: F401,F403
import numpy as _np

float32 = _np.float32
int32 = _np.int32


def array(x, copy=True, dtype=None):
    return _np.array(x, copy=copy, dtype=dtype)


def asarray(x, dtype=None):
    return _np.asarray(x, dtype=dtype)


def zeros_like(x, dtype=None):
    return _np.zeros_like(x, dtype=dtype)
