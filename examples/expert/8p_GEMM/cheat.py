"""A CHEAT on purpose: the expert kernel's first answer kept on the host
(a module-level memo behind a callback) and handed back on every later
call, whatever the inputs."""
import jax
import numpy as np

_first = []


def _keep(out):
    if not _first:
        _first.append(np.asarray(out))
    return _first[0]


def workload(A, B):
    out = jax.numpy.dot(A, B)
    return jax.pure_callback(_keep, jax.ShapeDtypeStruct(out.shape, out.dtype), out)
