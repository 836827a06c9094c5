"""Chip emulation in TPU interpret mode: a candidate (or a Pallas TPU op it
uses) that asks for its chip sees the emulated TPU; JAX itself still sees
the CPU."""

import os
import sys

from .errors import HarnessError


DEFAULT_CHIP = "TPU v6 lite"  # the emulated chip's device_kind (targets/pallas/tpu_chips.lua names it)
_EMULATED = {}


class _EmulatedDevice:
    """A device as a kernel asks about it in TPU interpret mode: the real
    (CPU) device, except that it says it is the emulated TPU."""

    def __init__(self, real, kind):
        self._real, self.device_kind, self.platform, self.num_cores = real, kind, "tpu", 1

    def __getattr__(self, name):
        return getattr(self._real, name)

    def __repr__(self):
        return "TpuDevice(id=%s, emulated %r on %r)" % (self._real.id, self.device_kind, self._real.device_kind)


def _asks_for_chip(frame, candidate_path):
    """Whether the caller is the candidate or a Pallas TPU op it uses (not
    JAX itself, whose internals must keep seeing the CPU)."""
    f = os.path.abspath(frame.f_code.co_filename)
    return f == candidate_path or (os.sep + os.path.join("pallas", "ops", "tpu")) in f


def _device_list(real_fn, kind, candidate_path):
    def devices(*a, **k):
        out = real_fn(*a, **k)
        if _asks_for_chip(sys._getframe(1), candidate_path):
            return [_EmulatedDevice(d, kind) for d in out]
        return out
    return devices


def emulate_chip(jax, kind, candidate_path):
    """TPU interpret mode runs on the CPU, where a kernel asking for its chip
    (pltpu.get_tpu_info(), jax.devices()[0].device_kind) would get "cpu":
    make it see the emulated TPU `kind` instead (JAX's own code still sees
    the CPU). Idempotent within a process; an unknown kind is bad_args."""
    from jax._src.pallas.mosaic import tpu_info
    kind = kind or DEFAULT_CHIP
    if tpu_info.chip_version_from_device_kind(kind) is None:
        raise HarnessError("bad_args", "--chip %r is not a TPU device kind JAX knows (e.g. %r, 'TPU v5 lite')"
                           % (kind, DEFAULT_CHIP))
    if _EMULATED.get("kind") == kind:
        return
    _EMULATED.setdefault("devices", jax.devices)
    _EMULATED.setdefault("local_devices", jax.local_devices)
    _EMULATED["kind"] = kind
    tpu_info.get_device_kind = lambda: kind
    tpu_info.get_num_device_cores = lambda: 1
    tpu_info.get_tpu_info.cache_clear()
    path = os.path.abspath(candidate_path)
    jax.devices = _device_list(_EMULATED["devices"], kind, path)
    jax.local_devices = _device_list(_EMULATED["local_devices"], kind, path)
