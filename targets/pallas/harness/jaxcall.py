"""The harness's way into JAX, imported only when first needed: the timers
captured before any candidate code runs, jit with a call's Python values
static, outputs as numpy, the device and its memory poisoned between
calls."""

import importlib.util
import os
import sys
import time

from .errors import HarnessError


_REAL = {}


def _jax():
    try:
        import jax
    except ImportError as e:
        raise HarnessError("no_jax", "JAX is not importable by %s: %s" % (sys.executable, e))
    # The functions timing depends on, captured before any candidate code
    # runs, so patching them from a candidate changes nothing here.
    _REAL.setdefault("block_until_ready", jax.block_until_ready)
    _REAL.setdefault("perf_counter", time.perf_counter)
    return jax


def _sync(x):
    return _REAL["block_until_ready"](x)


def _clock():
    return _REAL["perf_counter"]()


def _import_file(path, modname):
    spec = importlib.util.spec_from_file_location(modname, path)
    if spec is None:
        raise HarnessError("bad_task", "cannot import %s" % path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[modname] = mod
    spec.loader.exec_module(mod)
    return mod


def static_positions(args):
    """Positions of the Python values (not arrays) among a call's inputs: a
    size such as Megablox's max_expert_size is static, never traced."""
    return tuple(i for i, a in enumerate(args) if not hasattr(a, "shape"))


def jit_static(jax, fn, args):
    """jax.jit(fn) with the Python values among `args` static."""
    return jax.jit(fn, static_argnums=static_positions(args))


class _WithStatics:
    """A compiled executable called with the full argument list: the static
    (Python) values, baked in at lowering, are dropped before the call."""

    def __init__(self, compiled, positions):
        self.compiled, self.positions = compiled, set(positions)

    def __call__(self, *args):
        return self.compiled(*[a for i, a in enumerate(args) if i not in self.positions])

    def __getattr__(self, name):
        return getattr(self.compiled, name)


def _leaves(out):
    jax = _jax()
    return jax.tree_util.tree_leaves(out)


def _to_numpy(x):
    import numpy as np
    return np.asarray(x)


def device_info(jax):
    d = jax.devices()[0]
    return {"platform": d.platform, "device_kind": getattr(d, "device_kind", ""), "jax_version": jax.__version__}


def poison_device(jax, mbytes=None):
    """Fill a chunk of device memory with NaN then free it, so a kernel that
    returns uninitialised buffers shows NaN rather than a previous result."""
    if mbytes is None:
        # A host backend gains little from a large fill (interpreted kernels
        # get NaN-filled buffers anyway) and pays for it on every call.
        default = "256" if jax.default_backend() != "cpu" else "8"
        mbytes = int(os.environ.get("MK_PALLAS_POISON_MB", default))
    if mbytes <= 0:
        return
    try:
        import jax.numpy as jnp
        x = jnp.full((mbytes * (1 << 20) // 4,), jnp.nan, jnp.float32)
        x.block_until_ready()
        del x
    except Exception:  # best effort
        pass
