"""A numpy stand-in for the few JAX entry points harness.py uses.

Only for tests/python/test_pallas_harness.py on machines without JAX: it
lets the harness's orchestration (freeze, run, check, bench, profile,
baseline, error classification) run end to end on tiny tasks written in
the numpy subset below. It is never on the path when real JAX is tested.
"""

import contextlib
import os as _os

import numpy as _np

from . import lax, numpy, random, tree_util

__all__ = ["lax", "numpy", "random", "tree_util", "jit", "profiler"]

__version__ = "0.0-fake"

# A test sets MK_FAKE_COMPILE_ERROR to make .compile() fail like Mosaic.


class ShapeDtypeStruct:
    def __init__(self, shape, dtype):
        self.shape, self.dtype = tuple(shape), _np.dtype(dtype)


class _Device:
    platform = "cpu"
    device_kind = "fake cpu"


def devices():
    return [_Device()]


def block_until_ready(x):
    return x


def _concrete(spec):
    if isinstance(spec, ShapeDtypeStruct):
        return _np.ones(spec.shape, spec.dtype)
    return spec


class _Compiled:
    def __init__(self, f, specs):
        self.f, self.specs = f, specs

    def __call__(self, *args):
        return self.f(*args)

    def cost_analysis(self):
        nbytes = sum(_np.dtype(s.dtype).itemsize * int(_np.prod(s.shape))
                     for s in self.specs if isinstance(s, ShapeDtypeStruct))
        return [{"flops": 0.0, "bytes accessed": float(nbytes)}]


class _Lowered:
    def __init__(self, f, specs):
        self.f, self.specs = f, specs

    def compile(self):
        err = _os.environ.get("MK_FAKE_COMPILE_ERROR")
        if err:
            raise RuntimeError(err)
        return _Compiled(self.f, self.specs)


class _Jitted:
    def __init__(self, f):
        self.f = f

    def __call__(self, *args):
        return self.f(*args)

    def lower(self, *specs):
        # "Tracing": run once on placeholder inputs so Python errors surface here.
        self.f(*[_concrete(s) for s in specs])
        return _Lowered(self.f, specs)


def jit(f, **_):
    return _Jitted(f)


class profiler:  # lower case: it stands in for the module jax.profiler
    @staticmethod
    @contextlib.contextmanager
    def trace(_logdir):
        yield


def default_backend():
    return "cpu"
