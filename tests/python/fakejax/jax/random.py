"""jax.random stand-in: keys are integers, streams come from numpy."""
import numpy as _np


def key(seed):
    return ("key", int(seed))


PRNGKey = key


def fold_in(k, data):
    return ("key", (k[1] * 1000003 + int(data) + 1) % (1 << 31))


def split(k, num=2):
    return [("key", (k[1] * 7919 + i + 1) % (1 << 31)) for i in range(num)]


def _rng(k):
    return _np.random.default_rng(k[1])


def normal(k, shape=(), dtype=_np.float32):
    return _rng(k).standard_normal(shape).astype(dtype)


def uniform(k, shape=(), dtype=_np.float32, minval=0.0, maxval=1.0):
    return _rng(k).uniform(minval, maxval, shape).astype(dtype)


def randint(k, shape, minval, maxval, dtype=_np.int32):
    return _rng(k).integers(minval, maxval, shape).astype(dtype)
