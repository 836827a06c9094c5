"""mkengine's harness for the JAX Pallas target.

One program, one subcommand per step, one JSON object on stdout:

  load      describe a task (no JAX needed: the task files are parsed, not run)
  tunables  list the `# mk:tune NAME = [v, ...]` lines of a candidate (no JAX)
  freeze    inputs and expected outputs from the reference, SHA-256 manifest
  compile   jax.jit(entry).lower(...) then .compile(); lowering and Mosaic
            compile errors are reported apart, with their text
  run       run a candidate on frozen inputs, write its outputs (no expected
            outputs are read by the process that runs candidate code)
  check     compare outputs written by `run` with the expected ones (numpy
            only: never imports JAX nor candidate code)
  test      run + check in one process (convenient, less isolated)
  bench     on-device time from a jax.profiler trace (median of the
            executable's device events), falling back to wall time
  profile   cost_analysis FLOPs/bytes, achieved vs chip peaks, bound class
  baseline  bench + cost analysis of jax.jit(reference): the XLA baseline

Task formats: JAXBench `baseline.py` (CONFIG, create_inputs, workload,
optional get_flops), MaxKernel `reference.py` + `kernel_task.yaml`
(get_inputs -> ([dynamic], [static]), computation), and mkengine's own
`task.lua` + `reference.py` (JAXBench conventions, plus optional
TEST_CONFIGS and a `seed` argument of create_inputs).

JAX, numpy and yaml are imported lazily so that loading, tunables, the
manifest, the comparison and the trace-event logic are testable without JAX.
Exit code: 0 when a verdict was printed (whatever it is), 3 when the
environment cannot run the step (JAX missing...), 2 on bad arguments.
"""

import argparse
import hashlib
import importlib.util
import io
import json
import math
import os
import re
import sys
import time
import traceback

from .errors import CandidateError, CandidateRejected, HarnessError, candidate_failure, error_text, name_candidate
from .tasks import _overrides, _read, load_task
from .tunables import parse_tunables
from .screen import scan_candidate
from .suite import MANIFEST, case_ids, read_case, read_cases, sha256_file, verify_manifest, write_manifest
from .arrays import _EXOTIC, load_arrays, save_arrays, write_json
from .compare import check_outputs, compare_outputs


HARNESS_VERSION = 3


STATUSES = ("ok", "compile_error", "incorrect", "timeout", "crash", "rejected")
# ... and "rescale": no verdict at this (shrunk) test scale, see lower_checked


def median(xs):
    xs = sorted(xs)
    n = len(xs)
    if n == 0:
        return None
    return xs[n // 2] if n % 2 else 0.5 * (xs[n // 2 - 1] + xs[n // 2])


def summarize(samples):
    """Median, min, max and relative spread (IQR / median) of seconds."""
    xs = sorted(samples)
    if not xs:
        return None
    q = lambda p: xs[min(len(xs) - 1, max(0, int(round(p * (len(xs) - 1)))))]
    med = median(xs)
    return {"median_s": med, "min_s": xs[0], "max_s": xs[-1], "n": len(xs),
            "spread": (q(0.75) - q(0.25)) / med if med else 0.0}


def device_event_durations(planes, module, expected_calls=None):
    """Durations (s) of one executable's calls from profiler planes.

    `planes`: [{"name": "/device:TPU:0", "lines": [{"name": "XLA Modules",
    "events": [{"name": "jit_mk_candidate(12)", "duration_ns": 1000.0}]}]}].
    Uses the "XLA Modules" line of the first device plane that has events
    for `module` (one event per executable call). When expected_calls is
    given, keeps the last that many events (earlier ones are warm-up)."""
    for plane in planes:
        pname = plane.get("name", "")
        if not pname.startswith("/device:") or "CPU" in pname:
            continue
        for line in plane.get("lines", []):
            if line.get("name") != "XLA Modules":
                continue
            evs = [e for e in line.get("events", [])
                   if _module_matches(e.get("name", ""), module)]
            if not evs:
                continue
            evs.sort(key=lambda e: e.get("start_ns", 0))
            d = [float(e["duration_ns"]) * 1e-9 for e in evs]
            if expected_calls:
                d = d[-expected_calls:]
            return d
    return []


def _module_matches(event_name, module):
    # XLA module events are named "jit_fn(<id>)" or "jit_fn" (versions vary).
    base = event_name.split("(", 1)[0].strip()
    return base == module or base.startswith(module + ".") or base == module + "_1"


# Dense bf16 peaks per chip; FLOP/s and bytes/s.
PEAKS = [
    (r"v6", "TPU v6e", 918e12, 1638e9),
    (r"v5 ?lite|v5e", "TPU v5e", 197e12, 819e9),
    (r"v5p|v5$", "TPU v5p", 459e12, 2765e9),
    (r"v4", "TPU v4", 275e12, 1228e9),
    (r"H200", "NVIDIA H200", 989e12, 4800e9),
    (r"H100", "NVIDIA H100", 989e12, 3350e9),
    (r"A100", "NVIDIA A100", 312e12, 2039e9),
]


def chip_peaks(device_kind):
    for pat, name, flops, bw in PEAKS:
        if re.search(pat, device_kind or "", re.I):
            return {"chip": name, "peak_flops": flops, "peak_bytes_per_s": bw}
    return None


def roofline(flops, bytes_accessed, latency_s, peaks):
    """Achieved rates, fractions of peak and a bound classification."""
    out = {"flops": flops, "bytes": bytes_accessed, "latency_s": latency_s}
    if latency_s and latency_s > 0:
        out["achieved_flops"] = flops / latency_s if flops else None
        out["achieved_bytes_per_s"] = bytes_accessed / latency_s if bytes_accessed else None
    if flops and bytes_accessed:
        out["intensity"] = flops / bytes_accessed
    if peaks:
        out.update(peaks)
        ridge = peaks["peak_flops"] / peaks["peak_bytes_per_s"]
        out["ridge_intensity"] = ridge
        fc = (out.get("achieved_flops") or 0) / peaks["peak_flops"]
        fb = (out.get("achieved_bytes_per_s") or 0) / peaks["peak_bytes_per_s"]
        out["compute_fraction"], out["bandwidth_fraction"] = fc, fb
        if out.get("intensity") is not None:
            out["bound"] = "compute" if out["intensity"] >= ridge else "memory"
            if max(fc, fb) < 0.1:
                out["bound"] = "latency"  # neither unit is near busy: overheads, small grid
        elif bytes_accessed:
            out["bound"] = "memory"
    return out


def roofline_text(r, what="kernel"):
    parts = []
    if r.get("latency_s"):
        parts.append("%s latency %.4g ms" % (what, r["latency_s"] * 1e3))
    if r.get("achieved_flops"):
        parts.append("%.3g TFLOP/s" % (r["achieved_flops"] / 1e12))
    if r.get("achieved_bytes_per_s"):
        parts.append("%.3g GB/s" % (r["achieved_bytes_per_s"] / 1e9))
    if r.get("intensity") is not None:
        parts.append("arithmetic intensity %.3g FLOP/byte" % r["intensity"])
    s = ", ".join(parts) + "." if parts else "No latency or cost figures."
    if r.get("chip"):
        s += " On %s (peaks %.0f TFLOP/s, %.0f GB/s; ridge %.3g FLOP/byte): %.1f%% of compute peak, %.1f%% of HBM bandwidth" % (
            r["chip"], r["peak_flops"] / 1e12, r["peak_bytes_per_s"] / 1e9, r["ridge_intensity"],
            100 * r.get("compute_fraction", 0), 100 * r.get("bandwidth_fraction", 0))
        if r.get("bound") == "memory":
            s += "; memory-bound: cut HBM traffic (fuse, reuse blocks in VMEM, avoid re-reading operands, larger blocks)."
        elif r.get("bound") == "compute":
            s += "; compute-bound: keep the MXU fed (bf16 operands, f32 accumulation, 128/256-aligned tiles)."
        elif r.get("bound") == "latency":
            s += "; neither bound: overhead dominates (grid too fine, small blocks, serial steps); use larger blocks or fewer steps."
        else:
            s += "."
    return s


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


def _resolve_dtype(name):
    if not name:
        return None
    import jax.numpy as jnp
    try:
        return getattr(jnp, name)
    except AttributeError:
        raise HarnessError("bad_task", "unknown dtype %s" % name)


class _SeededKeys:
    """Derive the inputs of seed s from a task whose create_inputs uses a
    fixed jax.random key: while active, key(k)/PRNGKey(k) return
    fold_in(original, s). Seed 0 is the task's own inputs, untouched."""

    def __init__(self, jax, seed):
        self.jax, self.seed, self.saved = jax, seed, None

    def __enter__(self):
        if not self.seed:
            return self
        jr = self.jax.random
        self.saved = (jr.key, jr.PRNGKey)
        ok, opk = self.saved
        s = int(self.seed)
        jr.key = lambda *a, **k: jr.fold_in(ok(*a, **k), s)
        jr.PRNGKey = lambda *a, **k: jr.fold_in(opk(*a, **k), s)
        return self

    def __exit__(self, *exc):
        if self.saved:
            self.jax.random.key, self.jax.random.PRNGKey = self.saved
        return False


def reference_module(task):
    return _import_file(os.path.join(task["dir"], task["reference_file"]), "mk_reference")


class config_scope:
    """`mod.CONFIG` updated with `config` while the block runs, then restored:
    a case's sizes hold while its inputs are made and while the reference
    or a candidate that reads CONFIG (a mask of CONFIG['seq_len']) traces."""

    def __init__(self, mod, config, strict=True):
        self.cfg = getattr(mod, "CONFIG", None) if config else None
        if not isinstance(self.cfg, dict):
            if config and strict:
                raise HarnessError("bad_task", "the case's sizes need a CONFIG dict in %s" % mod.__name__)
            self.cfg = None  # a candidate without CONFIG reads its sizes from its inputs
        self.config, self.saved = config, None

    def __enter__(self):
        if self.cfg is not None:
            self.saved = dict(self.cfg)
            self.cfg.update(self.config)
        return self

    def __exit__(self, *exc):
        if self.saved is not None:
            self.cfg.clear()
            self.cfg.update(self.saved)
        return False


def make_inputs(task, ref, seed=0, config=None, dtype=None, inputs_fn=None):
    """(dynamic inputs list, static args list) for one case; `inputs_fn`
    replaces the task's own (a resized copy, see scaling.py)."""
    import inspect
    jax = _jax()
    fn = inputs_fn or getattr(ref, task["inputs_fn"])
    kwargs = {}
    params = inspect.signature(fn).parameters
    if dtype is not None and "dtype" in params:
        kwargs["dtype"] = dtype
    with config_scope(ref, config):
        if "seed" in params:
            kwargs["seed"] = seed
            out = fn(**kwargs)
        else:
            with _SeededKeys(jax, seed):
                out = fn(**kwargs)
    if task["format"] == "maxkernel":
        if not (isinstance(out, (tuple, list)) and len(out) == 2):
            raise HarnessError("bad_task", "get_inputs must return ([dynamic], [static])")
        return list(out[0]), list(out[1])
    if not isinstance(out, (tuple, list)):
        out = (out,)
    return list(out), []


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


def _install_interpret(jax):
    """Plain interpret mode: force interpret=True on every pallas_call (runs
    anywhere, also CPU, without TPU memory semantics)."""
    try:
        from jax.experimental import pallas as pl
    except ImportError:
        return
    orig = pl.pallas_call
    if getattr(orig, "_mk_interpret", False):
        return

    def pallas_call(*a, **k):
        k.setdefault("interpret", True)
        return orig(*a, **k)
    pallas_call._mk_interpret = True
    pl.pallas_call = pallas_call


INTERPRET_MODES = ("auto", "tpu", "plain", "off")


def interpret_mode(jax, mode):
    """The interpret mode a step runs in: 'tpu' (TPU interpret mode: Pallas
    TPU kernels run on the CPU with simulated HBM/VMEM, DMAs and semaphores,
    race detection, NaN-filled uninitialised memory, raising out-of-bounds
    reads), 'plain' (interpret=True) or 'off' (native). 'auto' is 'tpu' when
    JAX's backend is the CPU, else 'off'."""
    mode = {"1": "plain", "true": "plain", "0": "off", "false": "off", "": "auto", None: "auto"}.get(mode, mode)
    if mode not in INTERPRET_MODES:
        raise HarnessError("bad_args", "interpret mode %r is not one of %s" % (mode, ", ".join(INTERPRET_MODES)))
    if mode == "auto":
        return "tpu" if jax.default_backend() == "cpu" else "off"
    return mode


# Entries of the race detector's vector clocks. JAX's default (2 x cores)
# missed a race between two DMAs in flight (B's destination read after A's
# wait, before B's); every DMA in flight needs its own entry to be ordered.
VECTOR_CLOCK_SIZE = 16


# What TPU interpret mode has simulated in this process: grid steps (its
# grid_point_recorder) and DMAs started. A run that runs out of time tells
# from it a kernel the interpreter is too slow for (still counting when it
# was stopped) from one that hangs (a semaphore never signalled, a loop
# without steps): ProgressFile.
PROGRESS = {"steps": 0, "dmas": 0}


def _count_step(token, *_):
    PROGRESS["steps"] += 1
    return token


def _count_dmas():
    """Count the DMAs TPU interpret mode starts (its dma_start, looked up
    when a kernel is traced)."""
    try:
        from jax._src.pallas.mosaic.interpret import interpret_pallas_call as ipc
    except ImportError:  # another JAX: no DMA count, steps still counted
        return
    orig = getattr(ipc, "dma_start", None)
    if orig is None or getattr(orig, "_mk_count", False):
        return

    def dma_start(*a, **k):
        PROGRESS["dmas"] += 1
        return orig(*a, **k)
    dma_start._mk_count = True
    ipc.dma_start = dma_start


class _ClockRows:
    """The vector clocks of the accesses recorded for one buffer, as rows
    of one array, so that the clocks not ordered with a new access are
    found in one vectorised pass."""

    def __init__(self, width):
        import numpy as np
        self.rows, self.n = np.empty((64, width), np.int32), 0

    def add(self, clock):
        import numpy as np
        if self.n == len(self.rows):
            self.rows = np.concatenate([self.rows, np.empty_like(self.rows)])
        self.rows[self.n] = clock
        self.n += 1

    def unordered(self, clock, upto):
        """Indices below `upto` whose clock neither happened before `clock`
        nor after it (vector_clock.ordered false: equal clocks included)."""
        import numpy as np
        c = self.rows[:upto]
        le, ge = (c <= clock).all(1), (c >= clock).all(1)
        return np.flatnonzero(le == ge)  # both: equal; neither: concurrent


def _fast_race_checks():
    """TPU interpret mode's race detector compares a new access's vector
    clock with every earlier access to the same buffer, one numpy call per
    pair: quadratic in the accesses of a call (7p's ragged paged attention,
    ~8,700 page copies a call, spent ~90 ms a DMA on it; a 1,600-copy loop
    50 ms, 83 % of it in those comparisons). The same checks, the same
    pairs in the same order, with the comparisons of one access vectorised
    (_ClockRows). Returns whether it is installed (this JAX's detector has
    the shape it replaces)."""
    try:
        from jax._src.pallas.mosaic.interpret import race_detection_state as rds
        from jax._src import source_info_util
    except ImportError:
        return False
    cls = getattr(rds, "RaceDetectionState", None)
    overlap = getattr(rds, "_ranges_overlap", None)
    if cls is None or overlap is None or not hasattr(cls, "check_read") or not hasattr(cls, "check_write"):
        return False
    if getattr(cls, "_mk_fast", False):
        return True

    def rows(state, kind, key, width):
        table = state.__dict__.setdefault("_mk_rows", {})
        r = table.get((kind, key))
        if r is None:
            r = table[(kind, key)] = _ClockRows(width)
            for entry in (state.reads if kind == "r" else state.writes)[key]:  # recorded before: none, normally
                r.add(entry[2])
        return r

    def report(state, what, key, rnge, who, frame, clock, other, entry):
        print("RACE DETECTED\n  %s of buffer %s[%s] by %s, %s at %s\n  its clock: %s\n"
              "  races with the %s of [%s] by %s, %s at %s\n  whose clock: %s\n"
              % (what, key, rnge, who[0], who[1], frame, clock, other, entry[3], entry[0], entry[1], entry[4],
                 entry[2]))
        with state.lock:
            state.races_found = True

    def first_race(entries, found, clock, rnge):
        for i in found:
            if overlap(rnge, entries[i][3]):
                return entries[i]
        return None

    def frame_of(source_info):
        return source_info_util.summarize(source_info) if source_info is not None else "pallas_call"

    def check_read(self, device_id, local_core_id, clock, buffer_key, rnge, source_info=None):
        frame = frame_of(source_info)
        with self.lock:
            writes = self.writes[buffer_key]
            n_w = len(writes)
            w_rows = rows(self, "w", buffer_key, len(clock))
            r_rows = rows(self, "r", buffer_key, len(clock))
            self.reads[buffer_key].append((device_id, local_core_id, clock, rnge, frame))
            r_rows.add(clock)
        hit = first_race(writes, w_rows.unordered(clock, n_w), clock, rnge)
        if hit is not None:
            report(self, "read", buffer_key, rnge, (device_id, local_core_id), frame, clock, "write", hit)

    def check_write(self, device_id, local_core_id, clock, buffer_key, rnge, source_info=None):
        frame = frame_of(source_info)
        with self.lock:
            writes, reads = self.writes[buffer_key], self.reads[buffer_key]
            n_w, n_r = len(writes), len(reads)
            w_rows = rows(self, "w", buffer_key, len(clock))
            r_rows = rows(self, "r", buffer_key, len(clock))
            writes.append((device_id, local_core_id, clock, rnge, frame))
            w_rows.add(clock)
        who = (device_id, local_core_id)
        hit = first_race(writes, w_rows.unordered(clock, n_w), clock, rnge)
        if hit is not None:
            report(self, "write", buffer_key, rnge, who, frame, clock, "write", hit)
        hit = first_race(reads, r_rows.unordered(clock, n_r), clock, rnge)
        if hit is not None:
            report(self, "write", buffer_key, rnge, who, frame, clock, "read", hit)

    cls.check_read, cls.check_write, cls._mk_fast = check_read, check_write, True
    return True


def tpu_interpret_params():
    from jax.experimental.pallas import tpu as pltpu
    _count_dmas()
    _fast_race_checks()
    # DMAs run when started ("eager"), not at their wait: a copy never waited
    # for (an unguarded prefetch past the array's end) was never run nor
    # bounds-checked; the race detector still sees a read before the wait.
    params = dict(detect_races=True, out_of_bounds_reads="raise", uninitialized_memory="nan",
                  vector_clock_size=VECTOR_CLOCK_SIZE, dma_execution_mode="eager")
    try:
        return pltpu.InterpretParams(grid_point_recorder=_count_step, **params)
    except TypeError:  # a JAX without the recorder
        return pltpu.InterpretParams(**params)


class ProgressFile:
    """While a run's calls go on, write DIR/progress.json ({"steps",
    "dmas", "case", "call", "wall": time.time()}) each second the counts
    moved, so that the engine can tell, when the run passes its limit,
    whether the interpreter was still simulating the kernel."""

    def __init__(self, outputs, period_s=1.0):
        import threading
        self.path, self.period_s, self.where = os.path.join(outputs, "progress.json"), period_s, {}
        self.done = threading.Event()
        threading.Thread(target=self._loop, name="mk-progress", daemon=True).start()

    def _loop(self):
        last = (PROGRESS["steps"], PROGRESS["dmas"])
        while not self.done.wait(self.period_s):
            now = (PROGRESS["steps"], PROGRESS["dmas"])
            if now == last:
                continue
            last = now
            write_json(self.path, dict(PROGRESS, wall=time.time(), **self.where))

    def close(self):
        self.done.set()


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


def reset_tpu_interpret():
    """After an exception in a TPU-interpreted kernel its simulated state
    stays behind and must be reset before the next kernel runs."""
    from jax.experimental.pallas import tpu as pltpu
    pltpu.reset_tpu_interpret_mode_state()


class _Tee(io.TextIOBase):
    """sys.stdout while an interpreted kernel runs: everything still goes to
    `out` (stderr), and is kept so the race detector's report can be read."""

    def __init__(self, out):
        super().__init__()
        self.out, self.parts = out, []

    def write(self, s):
        self.parts.append(s)
        return self.out.write(s)

    def flush(self):
        self.out.flush()

    def text(self):
        return "".join(self.parts)


_RACE_RE = re.compile(r"RACE DETECTED\n(?:[^\n]*\n){0,4}")
# Element accesses ("Out-of-bounds read of ...") and BlockSpec index maps
# ("Out-of-bounds block index (0, 4) for input "a_ref" ...") alike.
_OOB_RE = re.compile(r"Out-of-bounds (?:read|write|block index)[^\n]*")


def _races_found():
    try:
        from jax._src.pallas.mosaic.interpret import interpret_pallas_call as ipc
    except ImportError:
        return False
    return bool(getattr(ipc.races, "races_found", False)) if ipc.races is not None else False


def _clear_races():
    try:
        from jax._src.pallas.mosaic.interpret import interpret_pallas_call as ipc
    except ImportError:
        return
    if ipc.races is not None:
        ipc.races.races_found = False


def call_checked(compiled, args, mode, candidate_path=None):
    """Call `compiled` and wait for it. In TPU interpret mode, a data race,
    an out-of-bounds access or (through NaN outputs, found by `check`) a
    read of uninitialised memory is the candidate's fault: returns
    (output, None) or (None, verdict) with status "incorrect" and a reason
    "race" | "out_of_bounds" that says which."""
    if mode != "tpu":
        out = compiled(*args)
        _sync(out)
        return out, None
    _clear_races()
    tee = _Tee(sys.stdout)
    saved, sys.stdout = sys.stdout, tee
    try:
        out = compiled(*args)
        _sync(out)
    except Exception as e:  # classified below, re-raised otherwise
        reset_tpu_interpret()
        m = _OOB_RE.search(name_candidate(str(e), candidate_path))
        if not m:
            raise
        return None, {"status": "incorrect", "correct": False, "reason": "out_of_bounds",
                      "message": "TPU interpret mode: the kernel accessed memory out of bounds: %s (a block "
                                 "index or pl.ds slice goes past the array or scratch buffer)" % m.group(0)}
    finally:
        sys.stdout = saved
    report = tee.text()
    if "RACE DETECTED" in report or _races_found():
        m = _RACE_RE.search(report)
        detail = name_candidate(m.group(0).strip().replace("\n", "; ") if m else "", candidate_path)
        return None, {"status": "incorrect", "correct": False, "reason": "race",
                      "message": "TPU interpret mode detected a data race (a read or write of a buffer while a "
                                 "DMA into it is in flight, or concurrent grid steps touching the same data: "
                                 "wait on the DMA semaphore before using the buffer)%s"
                                 % (": " + detail if detail else "")}
    return out, None


# What one candidate's earlier steps in this process made (a `worker
# --session` serves one candidate's steps): the identity of the candidate it
# serves, its imported module and its executables, keyed by exec_key().
_SESSION = {}


def _candidate_key(path, source, params, interpret, chip):
    return (os.path.abspath(path), hashlib.sha256(source.encode("utf-8", "surrogateescape")).hexdigest(),
            json.dumps(params or {}, sort_keys=True, default=str), interpret, chip)


def load_candidate(path, params=None, interpret="off", chip=None):
    """Import the candidate; tunable params become module globals before any
    trace. In TPU interpret mode it sees the emulated `chip`. Raises
    CandidateError('import') on failure. A later step of a session gets the
    module its first step imported (the same file, params and mode); a
    different candidate is refused (HarnessError kind session): one
    candidate per process keeps candidates apart."""
    jax = _jax()
    source = _read(path)
    key = _candidate_key(path, source, params, interpret, chip)
    if _SESSION.get("on"):
        if _SESSION.setdefault("key", key) != key:
            raise HarnessError("session", "this harness process serves one candidate (%s); asked for another "
                               "(%s)" % (_SESSION["key"][0], key[0]))
        if "module" in _SESSION:
            return _SESSION["module"]
    bad = scan_candidate(source)
    if bad:
        raise CandidateRejected("; ".join(bad[:5]))
    if interpret == "plain":
        _install_interpret(jax)
    if interpret == "tpu":
        emulate_chip(jax, chip, path)
    watch_pallas_calls(jax)
    try:
        mod = _import_file(path, "mk_candidate")
    except BaseException as e:  # SystemExit from candidate code too
        raise CandidateError("import", e)
    for k, v in (params or {}).items():
        setattr(mod, k, v)
    if _SESSION.get("on"):
        _SESSION.update(module=mod, exec={})
    return mod


def entry_fn(task, mod, statics):
    """A jit-able function of the dynamic inputs named mk_candidate/mk_reference."""
    f = getattr(mod, task["entry"], None)
    if not callable(f):
        return None

    def bind(*dyn):
        return f(*dyn, *statics)
    bind.__name__ = "mk_" + ("reference" if mod.__name__ == "mk_reference" else "candidate")
    return bind


def lower_and_compile(jax, fn, args, candidate_path=None, interpret="off"):
    """(compiled, timings) or raise CandidateError('lower'|'compile').
    In TPU interpret mode the kernel is first lowered for the TPU (Mosaic
    lowering runs on any host: block shapes, layouts and unsupported ops are
    checked as a TPU would), then lowered and compiled for the CPU with
    every pallas_call run by TPU interpret mode."""
    specs = [jax.ShapeDtypeStruct(a.shape, a.dtype) if hasattr(a, "shape") else a for a in args]
    t0 = time.perf_counter()
    try:
        if interpret == "tpu":
            try:
                traced = jit_static(jax, fn, args).trace(*specs)
            except BaseException as e:  # any failure: noted, then re-raised
                e.mk_note = "tracing the candidate failed"
                raise
            try:
                traced.lower(lowering_platforms=("tpu",))
            except BaseException as e:  # any failure: noted, then re-raised
                e.mk_note = "lowering for TPU (Mosaic) failed"
                raise
            from jax.experimental.pallas import tpu as pltpu
            with pltpu.force_tpu_interpret_mode(tpu_interpret_params()):
                lowered = jit_static(jax, fn, args).lower(*specs)
        else:
            lowered = jit_static(jax, fn, args).lower(*specs)
    except BaseException as e:  # whatever lowering the candidate raises is its lowering error
        raise CandidateError("lower", e)
    t1 = time.perf_counter()
    try:
        compiled = lowered.compile()
    except BaseException as e:  # whatever compiling the candidate raises is its compile error
        raise CandidateError("compile", e)
    if static_positions(args):
        compiled = _WithStatics(compiled, static_positions(args))
    return compiled, {"lower_s": t1 - t0, "compile_s": time.perf_counter() - t1}


_SCALE_HINTS = []  # why the kernel looks made for larger sizes, from the pallas_calls traced
_CASE_HINTS = {}  # case id -> the block hints of a scaled case that lowered (see lower_checked)


class Rescale(Exception):
    """The case is test-scaled and the kernel is not made for it: no verdict
    here (status "rescale"); the engine re-tests it at a larger scale."""

    def __init__(self, cid, why):
        super().__init__(why)
        self.result = {"status": "rescale", "case": cid, "reason": why,
                       "message": "case %s is test-scaled and the kernel is made for larger sizes: %s" % (cid, why)}


def _spec_list(specs):
    if specs is None:
        return []
    return list(specs) if isinstance(specs, (list, tuple)) else [specs]


def _block_over(spec, shape, name):
    block = getattr(spec, "block_shape", None)
    if block is None or shape is None or len(block) != len(shape):
        return None
    if any(isinstance(b, int) and not isinstance(b, bool) and b > d for b, d in zip(block, shape)):
        return "block %s of %s exceeds its shape %s" % (tuple(block), name, tuple(shape))
    return None


MAX_GRID_WALK = 4096  # grid points whose output block indices are evaluated (_uncovered)


def _uncovered(spec, shape, grid, name):
    """A grid that leaves part of an output unwritten in some dimension (a
    floor-divided grid, 3584 // 2048 = 1, for sizes that are not multiples
    of the blocks, as a test scale's are), from the spec's index map at
    every grid point; None when it covers or cannot be told."""
    block, imap = getattr(spec, "block_shape", None), getattr(spec, "index_map", None)
    if block is None or imap is None or shape is None or len(block) != len(shape) or not grid:
        return None
    if any(not isinstance(d, int) for d in grid) or not 0 < math.prod(grid) <= MAX_GRID_WALK:
        return None
    import itertools
    top = [0] * len(block)
    for point in itertools.product(*[range(d) for d in grid]):
        idx = imap(*point)
        for k, v in enumerate(idx if isinstance(idx, (tuple, list)) else (idx,)):
            top[k] = max(top[k], int(v) + 1)
    for k, (b, d) in enumerate(zip(block, shape)):
        if isinstance(b, int) and not isinstance(b, bool) and b <= d and top[k] * b < d:
            return "the grid writes %d of the %d entries of %s in dimension %d" % (top[k] * b, d, name, k)
    return None


def scale_hints(grid, in_specs, out_specs, operands, outputs):
    """Signs, in one pallas_call, that its sizes are smaller than the kernel
    was written for: a grid with an empty dimension, a block larger than
    its array in some dimension, a grid that does not cover an output."""
    g = tuple(grid) if isinstance(grid, (list, tuple)) else (grid,) if isinstance(grid, int) else ()
    hints = ["empty grid %s" % (g,)] if any(isinstance(d, int) and d == 0 for d in g) else []
    pairs = [(sp, getattr(x, "shape", None), "input %d" % i) for i, (sp, x) in
             enumerate(zip(_spec_list(in_specs), operands))]
    outs = [(sp, getattr(x, "shape", None), "output %d" % i) for i, (sp, x) in
            enumerate(zip(_spec_list(out_specs), outputs))]
    hints += [h for h in (_block_over(*p) for p in pairs + outs) if h]
    if not hints:
        for sp, shape, name in outs:
            try:
                h = _uncovered(sp, shape, g, name)
            except Exception:  # an index map that needs more than grid indices: no sign from it
                h = None
            hints += [h] if h else []
    return hints


def _record_hints(jax, k, args):
    gs = k.get("grid_spec")
    src = gs if gs is not None else None
    grid = getattr(src, "grid", None) if src is not None else k.get("grid", ())
    ins = getattr(src, "in_specs", None) if src is not None else k.get("in_specs")
    outs = getattr(src, "out_specs", None) if src is not None else k.get("out_specs")
    pre = int(getattr(src, "num_scalar_prefetch", 0) or 0) if src is not None else 0
    out_shape = jax.tree_util.tree_leaves(k.get("out_shape"), is_leaf=lambda x: hasattr(x, "shape"))
    _SCALE_HINTS.extend(scale_hints(grid, ins, outs, list(args)[pre:], out_shape))


def watch_pallas_calls(jax):
    """Wrap pl.pallas_call (before the candidate is imported) so that every
    call traced records its scale hints in _SCALE_HINTS. Never changes what
    the call does; a failure to read the specs records nothing."""
    from jax.experimental import pallas as pl
    orig = pl.pallas_call
    if getattr(orig, "_mk_watch", False):
        return

    def pallas_call(*a, **k):
        f = orig(*a, **k)
        if a[1:2]:
            k = dict(k, out_shape=a[1])

        def call(*args, **kw):
            try:
                _record_hints(jax, k, args)
            except Exception:  # reading specs is best effort: the call itself decides
                pass
            return f(*args, **kw)
        return call
    pallas_call._mk_watch = True
    pl.pallas_call = pallas_call


def own_check_raised(exc, candidate_path):
    """Whether the exception (or one it came from) was raised by a `raise` or
    `assert` statement of the candidate itself: its own shape check."""
    seen = 0
    while exc is not None and seen < 5:
        tb = traceback.extract_tb(exc.__traceback__)
        if tb and os.path.abspath(tb[-1].filename) == os.path.abspath(candidate_path) and \
                (tb[-1].line or "").lstrip().startswith(("raise", "assert")):
            return True
        exc, seen = exc.__cause__ or exc.__context__, seen + 1
    return False


def traces_at_own_sizes(jax, task, mod):
    """Whether the candidate traces at the task's own sizes, abstractly
    (inputs as shapes from the inputs function under the task's own
    CONFIG; nothing is made or run). A kernel that fails to trace at a
    test-scaled case but traces there was made for those sizes (a splash
    kernel's mask tables, made with numpy for whole blocks): the failure
    is the scale's, not the kernel's."""
    hints = list(_SCALE_HINTS)
    try:
        ref = reference_module(task)
        ab = _scaling()._abstract_inputs(sys.modules[__package__], jax, task, ref, None, None)
        if ab is None:
            return False
        dyn, statics = ab
        with config_scope(mod, dict(getattr(ref, "CONFIG", None) or {}), strict=False):
            jit_static(jax, entry_fn(task, mod, statics), dyn).trace(*dyn)
        return True
    except Exception:  # it fails there too: its own fault
        return False
    finally:
        _SCALE_HINTS[:] = hints


def case_is_scaled(tests_dir, cid):
    """Whether a frozen case's sizes were shrunk from the task's own: it
    records a scale factor above 1, or one of its CONFIG entries has the
    shrunk value (a TEST_CONFIGS entry's own sizes are the task's choice)."""
    if not tests_dir or not cid:
        return False
    info, meta = read_cases(tests_dir), read_case(tests_dir, cid)
    if (meta.get("scale_factor") or (info.get("scale") or {}).get("factor") or 1) > 1:
        return True
    cfg = meta.get("config") or {}
    return any(k in cfg and cfg[k] == v for k, v in (info.get("scaled_config") or {}).items())


def exec_key(args, statics, config):
    """What an executable of the candidate depends on besides its module:
    the inputs' shapes and dtypes (Python values as written), the static
    arguments and the case's CONFIG."""
    return json.dumps([[list(x.shape), str(x.dtype)] if hasattr(x, "shape") else repr(x) for x in args]
                      + [repr(statics), config], sort_keys=True, default=str)


_MOVES = frozenset((
    "reshape", "transpose", "broadcast_in_dim", "squeeze", "expand_dims", "slice", "dynamic_slice",
    "dynamic_update_slice", "concatenate", "pad", "convert_element_type", "copy", "copy_p", "iota", "gather",
    "rev", "device_put", "bitcast_convert_type", "stop_gradient", "get", "swap", "load", "store", "masked_load",
    "masked_swap", "dma_start", "dma_wait", "semaphore_signal", "semaphore_wait", "semaphore_read", "program_id",
    "num_programs", "run_scoped", "delay", "optimization_barrier"))


def _size(v):
    return math.prod(getattr(getattr(v, "aval", None), "shape", ()) or ())


def _eqn_work(eqn):
    name = eqn.primitive.name
    if name in _MOVES:
        return 0
    if name == "dot_general":
        (lc, _), _ = eqn.params["dimension_numbers"]
        lhs = eqn.invars[0].aval.shape
        return 2 * _size(eqn.outvars[0]) * math.prod(lhs[i] for i in lc)
    if name == "conv_general_dilated":
        rhs = eqn.invars[1].aval.shape
        out_ch = rhs[eqn.params["dimension_numbers"].rhs_spec[0]]
        return 2 * _size(eqn.outvars[0]) * (math.prod(rhs) // max(1, out_ch))
    return max([_size(v) for v in list(eqn.invars) + list(eqn.outvars)] + [1])


def jaxpr_work(jaxpr, acc=None):
    """{"plain": work outside pallas_calls, "pallas": work in their kernels
    (a kernel's body times its grid steps), "calls": pallas_calls traced,
    "top": {primitive: plain work}} of a jaxpr (a loop's body counted once
    per scan step, once for a while loop; a cond's costliest branch)."""
    from jax.extend.core import jaxprs_in_params
    acc = acc if acc is not None else {"plain": 0, "pallas": 0, "calls": 0, "top": {}}
    for eqn in jaxpr.eqns:
        name = eqn.primitive.name
        if name == "pallas_call":
            inner = jaxpr_work(eqn.params["jaxpr"])
            grid = getattr(eqn.params.get("grid_mapping"), "grid", ()) or ()
            steps = math.prod(g if isinstance(g, int) else 1 for g in grid)
            acc["pallas"] += (inner["plain"] + inner["pallas"]) * steps
            acc["calls"] += 1 + inner["calls"]
            continue
        subs = [jaxpr_work(j) for j in jaxprs_in_params(eqn.params)]
        if subs:
            if name == "cond":
                subs = [max(subs, key=lambda w: w["plain"] + w["pallas"])]
            mult = eqn.params.get("length", 1) if name == "scan" else 1
            for w in subs:
                acc["plain"] += w["plain"] * mult
                acc["pallas"] += w["pallas"] * mult
                acc["calls"] += w["calls"]
                for k, v in w["top"].items():
                    acc["top"][k] = acc["top"].get(k, 0) + v * mult
            continue
        w = _eqn_work(eqn)
        acc["plain"] += w
        if w:
            acc["top"][name] = acc["top"].get(name, 0) + w
    return acc


def traced_work(jax, fn, args):
    """jaxpr_work of fn traced at args' shapes (None when it cannot be)."""
    specs = [jax.ShapeDtypeStruct(x.shape, x.dtype) if hasattr(x, "shape") else x for x in args]
    try:
        w = jaxpr_work(jit_static(jax, fn, args).trace(*specs).jaxpr.jaxpr)
    except Exception:  # counting is best effort: a trace that fails is the compile's to report
        return None
    w["top"] = dict(sorted(w["top"].items(), key=lambda kv: -kv[1])[:3])
    return w


def case_work(tests_dir, cid, jax, fn, args):
    """The candidate's work split at case cid, with the reference's work
    frozen for that case ("reference"), for the engine's judgement."""
    w = traced_work(jax, fn, args)
    if w is not None and tests_dir and cid:
        try:
            w["reference"] = read_case(tests_dir, cid).get("reference_work")
        except (OSError, ValueError):  # no frozen case of that id (bench inputs made anew)
            pass
    return w


def lower_checked(jax, fn, args, a, mode, cid, key=None, own_sizes=None):
    """lower_and_compile for case `cid` of a.tests; raises Rescale instead of
    a verdict when the case is test-scaled and the kernel is made for larger
    sizes (scale hints, its own check raised while tracing, or tracing failed
    where `own_sizes()`, traces_at_own_sizes, says it traces). In a session
    an executable an earlier step compiled for the same exec_key is reused
    (lower_s and compile_s 0, reused true); a failed compile is never kept."""
    scaled = case_is_scaled(getattr(a, "tests", None), cid)
    cache = _SESSION.get("exec") if key is not None else None
    if cache is not None and key in cache:
        out = (cache[key][0], {"lower_s": 0.0, "compile_s": 0.0, "reused": True, "work": cache[key][2]})
        found = cache[key][1]
    else:
        del _SCALE_HINTS[:]
        try:
            out = lower_and_compile(jax, fn, args, a.candidate, mode)
            out[1]["work"] = case_work(getattr(a, "tests", None), cid, jax, fn, args)
        except CandidateError as e:
            if scaled and (_SCALE_HINTS or (e.phase == "lower" and own_check_raised(e.exc, a.candidate))):
                raise Rescale(cid, "; ".join(_SCALE_HINTS) or "its own check raised: %s"
                              % error_text(e.exc, a.candidate).splitlines()[-1][:300])
            if scaled and own_sizes and getattr(e.exc, "mk_note", "") == "tracing the candidate failed" \
                    and own_sizes():
                raise Rescale(cid, "%s, but it traces at the task's own sizes"
                              % error_text(e.exc, a.candidate).splitlines()[-1][:300])
            raise
        found = list(dict.fromkeys(_SCALE_HINTS))
        if cache is not None:
            cache[key] = (out[0], found, out[1].get("work"))
    hints = found if scaled else []
    if any(h.startswith("empty grid") for h in hints):  # its output is never written: no verdict here
        raise Rescale(cid, "; ".join(hints))
    if hints:  # a block larger than its array may be fine: blamed only if the case then fails
        _CASE_HINTS[cid] = "; ".join(hints)
    return out


def rescale_instead(cid, verdict):
    """A run-time failure (crash, out-of-bounds, race) of a scaled case whose
    blocks exceed its arrays: the Rescale result instead of blaming it."""
    if cid in _CASE_HINTS:
        return Rescale(cid, "%s, and then: %s" % (_CASE_HINTS[cid], (verdict.get("message") or "")[:300])).result
    return None


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


def frozen_case_inputs(tests_dir, cid):
    jax = _jax()
    meta = read_case(tests_dir, cid)
    arrays = load_arrays(os.path.join(tests_dir, "inputs", cid + ".npz"), meta["inputs"])
    args, it = [], iter(arrays)
    for kind in meta["kinds"]:
        # device_put, not jnp.asarray: the same array and dtype, without a
        # conversion compiled for every new shape (20 ms each on the CPU)
        args.append(jax.device_put(next(it)) if kind == "array" else meta["scalars"].pop(0))
    return args, meta.get("statics", [])


def python_paths():
    """Directories this interpreter needs (prefixes, sys.path), top-level
    only: what a sandbox must show read-only for JAX to import."""
    cands = {sys.prefix, sys.base_prefix, sys.exec_prefix, os.path.dirname(os.path.realpath(sys.executable))}
    cands.update(p for p in sys.path if p and os.path.isdir(p))
    out = set()
    for p in cands:
        p = os.path.realpath(p)
        if os.path.isdir(p) and p != "/":
            out.add(p)
    # Drop paths already inside another listed path.
    return sorted(p for p in out if not any(p != q and p.startswith(q + "/") for q in out))


def cmd_load(a):
    task = load_task(a.task, _overrides(a))
    return {"status": "ok", "task": task, "python": {"executable": sys.executable, "paths": python_paths()}}


def cmd_tunables(a):
    return {"status": "ok", "tunables": parse_tunables(_read(a.candidate))}


def _split_inputs(dyn):
    """Arrays go to the .npz; Python scalars to JSON."""
    import numpy as np
    kinds, arrays, scalars = [], [], []
    for x in dyn:
        if hasattr(x, "shape") and hasattr(x, "dtype"):
            kinds.append("array")
            arrays.append(np.asarray(x))
        elif isinstance(x, (bool, int, float, str)) or x is None:
            kinds.append("scalar")
            scalars.append(x)
        else:
            raise HarnessError("bad_task", "input of type %s cannot be frozen" % type(x).__name__)
    return kinds, arrays, scalars


TEST_SCALE_TARGET = 256  # the first scale tried brings the largest size to about this (scaling.py)
CASES_BUDGET_S = 120  # reference seconds the cases of an unscaled freeze may take; fewer cases beyond


def _scaling():
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    try:
        import scaling  # targets/pallas/scaling.py, beside this package
    finally:
        sys.path.pop(0)
    return scaling


def test_scale_target(jax, value):
    """--test-scale: 'auto' (scale on a CPU backend, where kernels are
    interpreted; not on a device), 'off' / 0, or the size the largest
    dimension is brought to first, as an integer."""
    v = str(value or "auto").lower()
    if v == "auto":
        return TEST_SCALE_TARGET if jax.default_backend() == "cpu" else None
    if v in ("off", "0", "none", "false"):
        return None
    try:
        n = int(v)
    except ValueError:
        raise HarnessError("bad_args", "--test-scale must be auto, off or a size, not %r" % value)
    return n if n > 0 else None


def choose_scale(jax, task, ref, dtype, a):
    """The Attempt whose sizes the cases use (scaling.py), and the record of
    the search for cases.json. --scale-factor F freezes at F, unsearched."""
    sc = _scaling()
    mem = int(os.environ.get("MK_PALLAS_MEM_MB") or 0) << 20
    def log(m):
        sys.stderr.write(m + "\n")
    if a.scale_factor:
        syms = sc.symbols(task["reference"], task["inputs_fn"], task["config"], task["entry"])
        chosen = sc.try_factor(sys.modules[__package__], jax, task, ref, dtype, syms, a.scale_factor, mem // 3,
                               sc.FACTOR_FLOP_BUDGET, tier=a.scale_tier)
        if chosen.reason and (chosen.reason != "nothing to scale" or a.scale_tier):  # no widths: not a scale
            raise HarnessError("cannot_freeze", "%s at scale factor %d: %s" % (task["name"], a.scale_factor,
                                                                             chosen.reason))
        tried = [chosen]
    else:
        target = test_scale_target(jax, a.test_scale)
        chosen, tried = sc.choose(sys.modules[__package__], jax, task, ref, dtype, target, mem // 3, log)
    record = {"factor": chosen.f, "target": None if a.scale_factor else test_scale_target(jax, a.test_scale),
              "tier": chosen.plan.get("tier"),
              "config": chosen.plan["config"], "inputs": chosen.plan["inputs"], "pinned": chosen.plan["pinned"],
              "flops": chosen.flops, "call_s": chosen.call_s, "tried": [t.record() for t in tried]}
    return chosen, record


def freeze_plan(task, seeds, heldout, scale):
    """[(case id, seed, CONFIG overrides, held-out)]; when the reference is
    slow at the chosen sizes, only seed 0 and one held-out seed are kept."""
    cfg = scale.plan["config"] or None
    plan = [("s%d" % s, s, cfg, False) for s in seeds]
    for i, over in enumerate(task["test_configs"]):
        plan.append(("c%d" % i, seeds[0], dict(cfg or {}, **over), False))
    plan += [("h%d" % s, s, cfg, True) for s in heldout]
    warn = []
    per_case = (scale.call_s or 0.0) * 2  # the inputs and the call
    if per_case * len(plan) > CASES_BUDGET_S and len(plan) > 2:
        keep = [c for c in plan if not c[3]][:1] + [c for c in plan if c[3]][:1]
        warn.append("the reference takes %.1f s a call at these sizes: %d of %d cases kept (%s)"
                    % (scale.call_s, len(keep), len(plan), ", ".join(c[0] for c in keep)))
        plan = keep
    return plan, warn


NARROW_FLOATS = ("bfloat16", "float16") + tuple(n for n in _EXOTIC if n.startswith("float8"))
WIDE_BUDGET_S = 60  # seconds a freeze may spend evaluating the reference in float32
WIDE_AGREE = 0.25  # ... whose outputs must be within this relative RMS of the reference's own


class WideRefused(ValueError):
    """A float32 evaluation of the reference that is not kept."""


def _narrow(x):
    return hasattr(x, "dtype") and str(x.dtype) in NARROW_FLOATS


def reference_in_float32(jax, fn, dyn, outs):
    """The reference's outputs with its bfloat16/float16 inputs widened to
    float32 (exactly: the same values), as numpy arrays, when its inputs or
    outputs are of such a type; else None. The bound of what a kernel
    computing in float32 may differ from the low-precision reference
    (compare_outputs `wide`). Raises when the reference refuses float32."""
    if not any(_narrow(x) for x in list(dyn) + list(outs)):
        return None
    import numpy as np
    wide = [x.astype("float32") if _narrow(x) else x for x in dyn]
    res = [_to_numpy(o) for o in _leaves(jit_static(jax, fn, wide)(*wide))]
    if [r.shape for r in res] != [o.shape for o in outs]:
        raise WideRefused("its float32 outputs have shapes %s, not %s"
                         % ([r.shape for r in res], [o.shape for o in outs]))
    res = [r.astype("float32") if r.dtype.kind == "f" else r for r in res]
    # Rounding moves a result a little; a reference that does something else
    # in float32 (a branch on its dtype) would excuse anything: not kept.
    for k, (r, o) in enumerate(zip(res, outs)):
        hi, lo = np.asarray(r, np.float64), np.asarray(o.astype("float32") if _narrow(o) else o, np.float64)
        fin = np.isfinite(hi) & np.isfinite(lo)
        if (np.isfinite(hi) != np.isfinite(lo)).any():
            raise WideRefused("output %d is finite in one precision and not the other" % k)
        size = float(np.sqrt(np.mean(np.square(hi[fin])))) if fin.any() else 0.0
        off = float(np.sqrt(np.mean(np.square(hi[fin] - lo[fin])))) if fin.any() else 0.0
        if off > WIDE_AGREE * size:
            raise WideRefused("output %d is %.3g RMS from its own (RMS %.3g): more than rounding" % (k, off, size))
    return res


def freeze_case(jax, task, ref, dtype, tests, case, scale, skip_wide=None):
    """Inputs and expected outputs of one case, written under `tests`
    (with the reference evaluated in float32 beside them when its types
    are narrower, unless `skip_wide` says why not); returns its cases.json
    entry, a digest of its inputs, and {"s": seconds the float32
    evaluation took, "why": why none was frozen, or None}."""
    cid, seed, cfg, held = case
    no_wide, wide_s = None, 0.0
    with config_scope(ref, cfg):
        dyn, statics = make_inputs(task, ref, seed, None, dtype, scale.inputs_fn)
        try:
            json.dumps(statics)
        except TypeError:
            raise HarnessError("bad_task", "static args must be JSON values to be frozen: %r" % (statics,))
        fn = entry_fn(task, ref, statics)
        outs = [_to_numpy(o) for o in _leaves(jit_static(jax, fn, dyn)(*dyn))]
        ref_work = traced_work(jax, fn, dyn)
        hi = None
        if skip_wide and any(_narrow(x) for x in list(dyn) + outs):
            no_wide = skip_wide
        elif not skip_wide:
            t0 = _clock()
            try:
                hi = reference_in_float32(jax, fn, dyn, outs)
                wide_s = _clock() - t0
            except WideRefused as e:
                no_wide = "its float32 evaluation is not kept (%s)" % e
            except Exception as e:  # the reference's own code: any error means "not available"
                no_wide = "the reference fails in float32 (%s)" % error_text(e, limit=200)
    h = hashlib.sha256()
    for x in dyn:
        h.update(_to_numpy(x).tobytes() if hasattr(x, "shape") else repr(x).encode())
    kinds, arrays, scalars = _split_inputs(dyn)
    imeta = save_arrays(os.path.join(tests, "inputs", cid + ".npz"), arrays)
    with open(os.path.join(tests, "inputs", cid + ".json"), "w") as f:
        json.dump({"id": cid, "seed": seed, "config": cfg, "kinds": kinds, "inputs": imeta,
                   "scalars": scalars, "statics": statics, "scale_factor": scale.f,
                   "reference_work": ref_work and ref_work["plain"] + ref_work["pallas"]}, f)
    ometa = save_arrays(os.path.join(tests, "expected", cid + ".npz"), outs)
    emeta = {"id": cid, "outputs": ometa}
    if hi is not None:
        emeta["float32"] = save_arrays(os.path.join(tests, "expected", cid + ".f32.npz"), hi)
    with open(os.path.join(tests, "expected", cid + ".json"), "w") as f:
        json.dump(emeta, f)
    entry = {"id": cid, "seed": seed, "config": cfg, "heldout": held, "float32": hi is not None,
             "shapes": [m["shape"] for m in imeta], "output_shapes": [m["shape"] for m in ometa]}
    return entry, (h.hexdigest(), json.dumps(cfg, sort_keys=True)), {"s": wide_s, "why": no_wide}


def cmd_freeze(a):
    task = load_task(a.task, _overrides(a))
    jax = _jax()
    ref = reference_module(task)
    dtype = _resolve_dtype(a.dtype)
    for sub in ("inputs", "expected"):
        os.makedirs(os.path.join(a.tests, sub), exist_ok=True)
    scale, record = choose_scale(jax, task, ref, dtype, a)
    plan, warnings = freeze_plan(task, _int_list(a.seeds) or [0], _int_list(a.heldout), scale)
    warnings += [scale.warning] if scale.warning else []
    cases, digests, wide_s, no_wide = [], {}, 0.0, []
    # held-out cases first: the final verdict is theirs (cases.json keeps the plan's order)
    for case in sorted(plan, key=lambda c: not c[3]):
        PHASE["now"] = "freezing case %s (scale factor %d)" % (case[0], scale.f)
        # The float32 evaluation costs about what the case does: it is made
        # while the freeze's share of time for it lasts.
        skip = None if wide_s < WIDE_BUDGET_S else "over the freeze's %d s for it" % WIDE_BUDGET_S
        entry, key, w = freeze_case(jax, task, ref, dtype, a.tests, case, scale, skip)
        wide_s += w["s"]
        if w["why"]:
            no_wide.append("%s: %s" % (entry["id"], w["why"]))
        # Seeds that do not change the inputs (create_inputs imported its key
        # function directly, say) are reported: they add no coverage.
        if key in digests:
            warnings.append("case %s has the same inputs as case %s: the seed does not reach create_inputs"
                            % (entry["id"], digests[key]))
        digests.setdefault(key, entry["id"])
        cases.append(entry)
    order = [c[0] for c in plan]
    cases.sort(key=lambda e: order.index(e["id"]))
    if no_wide:
        warnings.append("no float32 evaluation of the reference for case %s (kernels are judged against "
                        "its own precision alone there)" % "; case ".join(no_wide))
    with open(os.path.join(a.tests, "cases.json"), "w") as f:
        json.dump({"task": task["name"], "format": task["format"], "cases": cases,
                   "tolerance": task["tolerance"], "dtype": a.dtype, "device": device_info(jax),
                   "test_scale": record, "scaled_config": record["config"], "warnings": warnings,
                   "harness_version": HARNESS_VERSION}, f, indent=1)
    n = write_manifest(a.tests)
    return {"status": "ok", "cases": cases, "files": n, "warnings": warnings, "test_scale": record,
            "scaled_config": record["config"], "manifest_sha": sha256_file(os.path.join(a.tests, MANIFEST))}


def cmd_verify(a):
    """Check the manifest (no JAX): the idempotent half of freeze."""
    files = verify_manifest(a.tests)
    info = read_cases(a.tests)
    return {"status": "ok", "cases": info.get("cases", []), "files": len(files), "test_scale": info.get("test_scale"),
            "warnings": info.get("warnings", []), "manifest_sha": sha256_file(os.path.join(a.tests, MANIFEST))}


def task_flops(ref, config=None):
    """The task's get_flops() for the CONFIG a case was made with (a test-
    scaled case has other sizes than the module's CONFIG), or None."""
    if not hasattr(ref, "get_flops"):
        return None
    saved = None
    if config and isinstance(getattr(ref, "CONFIG", None), dict):
        saved = dict(ref.CONFIG)
        ref.CONFIG.update(config)
    try:
        return float(ref.get_flops())
    finally:
        if saved is not None:
            ref.CONFIG.clear()
            ref.CONFIG.update(saved)


def _case_config(a):
    if not getattr(a, "tests", None):
        return None
    cid = a.case or (case_ids(a.tests) or [None])[0]
    return read_case(a.tests, cid).get("config") if cid else None


def _bench_args(task, a):
    """Inputs for compile/bench: frozen case (tests dir) or the reference's."""
    if a.tests:
        cid = a.case or (case_ids(a.tests) or [None])[0]
        if cid is None:
            raise HarnessError("no_tests", "no search cases in %s" % a.tests)
        verify_manifest(a.tests, subset={"inputs"})
        return frozen_case_inputs(a.tests, cid)
    ref = reference_module(task)
    return make_inputs(task, ref, 0, None, _resolve_dtype(a.dtype))


def _timing_kind(mode):
    """What a step's timings are: 'interpret' (an interpreter's speed on the
    host, never a kernel timing) or 'device' (native: device events or wall)."""
    return "interpret" if mode in ("tpu", "plain") else "device"


def _bench_case(a):
    """The case whose inputs compile/bench/profile use, or None."""
    return (a.case or (case_ids(a.tests) or [None])[0]) if getattr(a, "tests", None) else None


def timed_scale(tests_dir, cid):
    """The scale of the case a timing step ran on: its id, scale factor,
    tier and input shapes, from the frozen files (None without a case). A
    candidate and a baseline timed on the same suite record the same, so
    their ratio compares equal sizes (an escalated candidate's baseline is
    timed at the candidate's scale: target.lua, mk.eval)."""
    if not tests_dir or not cid:
        return None
    meta = read_case(tests_dir, cid)
    rec = read_cases(tests_dir).get("test_scale")
    tier = rec.get("tier") if isinstance(rec, dict) else None
    return {"case": cid, "factor": meta.get("scale_factor"), "tier": tier,
            "shapes": [m["shape"] for m in meta.get("inputs", [])]}


def _candidate_compiled(task, a):
    jax = _jax()
    args, statics = _bench_args(task, a)
    mode = interpret_mode(jax, a.interpret)
    try:
        mod = load_candidate(a.candidate, _params(a), mode, a.chip)
        fn = entry_fn(task, mod, statics)
        if fn is None:
            return None, args, {"status": "compile_error", "phase": "import", "kind": "import",
                                "message": "kernel.py does not define %s(); it must match: %s"
                                           % (task["entry"], task["signature"])}
        cfg = _case_config(a)
        with config_scope(mod, cfg, strict=False):
            compiled, times = lower_checked(jax, fn, args, a, mode, _bench_case(a), exec_key(args, statics, cfg),
                                            lambda: traces_at_own_sizes(jax, task, mod))
    except CandidateRejected as e:
        return None, args, {"status": "rejected", "message": "kernel.py breaks the rules: %s" % e}
    except CandidateError as e:
        return None, args, dict(candidate_failure(e, a.candidate), interpret=mode)
    except Rescale as r:
        return None, args, dict(r.result, interpret=mode)
    return compiled, args, {"status": "ok", "interpret": mode, "timing": _timing_kind(mode), **times}


def cmd_compile(a):
    task = load_task(a.task, _overrides(a))
    jax = _jax()
    compiled, _, res = _candidate_compiled(task, a)
    res["device"] = device_info(jax)
    return res


def cmd_run(a):
    task = load_task(a.task, _overrides(a))
    jax = _jax()
    verify_manifest(a.tests, subset={"inputs"})
    cases = a.cases.split(",") if a.cases else case_ids(a.tests, heldout=a.heldout_cases)
    os.makedirs(a.outputs, exist_ok=True)
    mode = interpret_mode(jax, a.interpret)
    try:
        mod = load_candidate(a.candidate, _params(a), mode, a.chip)
    except CandidateRejected as e:
        return {"status": "rejected", "message": "kernel.py breaks the rules: %s" % e}
    except CandidateError as e:
        return candidate_failure(e, a.candidate)
    progress = ProgressFile(a.outputs)
    try:
        return _run_cases(task, jax, a, mod, mode, cases, progress)
    finally:
        progress.close()


def _run_cases(task, jax, a, mod, mode, cases, progress):
    ran, executables = [], {}
    own = {"compile_s": 0.0, "calls_s": 0.0}  # the candidate's own compile and run time
    for cid in cases:
        args, statics = frozen_case_inputs(a.tests, cid)
        fn = entry_fn(task, mod, statics)
        if fn is None:
            return {"status": "compile_error", "phase": "import", "kind": "import",
                    "message": "kernel.py does not define %s()" % task["entry"]}
        # Cases of the same shapes (the seeds) share one executable.
        cfg = read_case(a.tests, cid).get("config")
        sig = exec_key(args, statics, cfg)
        try:
            if sig not in executables:
                with config_scope(mod, cfg, strict=False):  # the case's sizes, for a candidate reading CONFIG
                    executables[sig], times = lower_checked(jax, fn, args, a, mode, cid, sig,
                                                            lambda: traces_at_own_sizes(jax, task, mod))
                own["compile_s"] += times["lower_s"] + times["compile_s"]
            compiled = executables[sig]
        except CandidateError as e:
            return candidate_failure(e, a.candidate)
        except Rescale as r:
            return dict(r.result, interpret=mode)
        # Two calls with fresh poison between: both outputs are checked, so
        # a kernel that does the work only on some calls is caught.
        for call in ("first", "repeat"):
            poison_device(jax)
            progress.where = {"case": cid, "call": call}
            try:
                t0 = _clock()
                out, verdict = call_checked(compiled, list(args), mode, a.candidate)
                call_s = _clock() - t0
                own["calls_s"] += call_s
                if verdict:
                    verdict.update(case=cid, call=call, phase="run", interpret=mode,
                                   message="case %s (%s call): %s" % (cid, call, verdict["message"]))
                    return rescale_instead(cid, verdict) or verdict
                outs = [_to_numpy(o) for o in _leaves(out)]
            except BaseException as e:  # whatever the candidate raises (SystemExit too) is its crash
                crash = {"status": "crash", "phase": "run", "case": cid, "message": error_text(e, a.candidate)}
                return rescale_instead(cid, crash) or crash
            # each call's outputs as it ends: a run that runs out of time
            # leaves those it made for a check (check --present-only)
            ometa = save_arrays(os.path.join(a.outputs, "%s.%s.npz" % (cid, call)), outs)
            write_json(os.path.join(a.outputs, "%s.%s.json" % (cid, call)), {"outputs": ometa, "call_s": call_s})
        ran.append(cid)
    res = {"status": "ok", "cases": ran, "interpret": mode, **own}
    if _CASE_HINTS:  # if `check` fails one of these cases first, the engine re-tests at a larger scale
        res["rescale_cases"] = dict(_CASE_HINTS)
    return res


def cmd_check(a):
    task = load_task(a.task, _overrides(a))
    cases = a.cases.split(",") if a.cases else case_ids(a.tests, heldout=a.heldout_cases)
    tol = task["tolerance"]
    calls = tuple(c for c in (getattr(a, "calls", None) or "first,repeat").split(",") if c)
    return check_outputs(a.tests, a.outputs, cases, tol["atol"], tol["rtol"], calls,
                         present_only=getattr(a, "present_only", False))


def cmd_test(a):
    import tempfile
    with tempfile.TemporaryDirectory(prefix="mk-pallas-out-") as d:
        a.outputs = d
        r = cmd_run(a)
        if r["status"] != "ok":
            return r
        return cmd_check(a)


def _trace_planes(jax, logdir):
    """Planes of the newest xplane.pb under logdir as plain dicts."""
    paths = []
    for root, _, names in os.walk(logdir):
        paths += [os.path.join(root, n) for n in names if n.endswith(".xplane.pb")]
    if not paths:
        return []
    path = max(paths, key=os.path.getmtime)
    from jax.profiler import ProfileData
    pd = ProfileData.from_file(path)
    planes = []
    for p in pd.planes:
        lines = []
        for ln in p.lines:
            lines.append({"name": ln.name, "events": [
                {"name": e.name, "duration_ns": e.duration_ns, "start_ns": getattr(e, "start_ns", 0)}
                for e in ln.events]})
        planes.append({"name": p.name, "lines": lines})
    return planes


def plan_iters(iters, min_time, max_iters, est_s):
    """Timed calls: at least `iters`, more until about min_time seconds of
    calls (estimated from one call), never more than max_iters."""
    n = max(1, int(iters))
    if min_time and est_s and est_s > 0:
        n = max(n, int(math.ceil(min_time / est_s)))
    if max_iters:
        n = min(n, int(max_iters))
    return n


def time_compiled(jax, compiled, args, module, warmup=3, iters=20, use_trace=True, min_time=0.0, max_iters=1000):
    """Median on-device seconds of `compiled(*args)`, with the method used.
    Inputs are rotated between two copies when they are small enough, so a
    result left in a cache cannot flatter the timing."""
    import tempfile
    import jax.numpy as jnp
    nbytes = sum(getattr(x, "nbytes", 0) for x in args)
    sets = [args]
    if nbytes < (256 << 20):
        sets.append([jnp.array(x, copy=True) if hasattr(x, "shape") else x for x in args])
    out = None
    t_all = _clock()
    for i in range(max(1, warmup)):
        t0 = _clock()
        out = compiled(*sets[i % len(sets)])
        _sync(out)
        est = _clock() - t0
    iters = plan_iters(iters, min_time, max_iters, est)
    wall = []
    for i in range(iters):
        t0 = _clock()
        out = compiled(*sets[i % len(sets)])
        _sync(out)
        wall.append(_clock() - t0)
    result = {"method": "wall", "wall": summarize(wall)}
    if use_trace:
        try:
            with tempfile.TemporaryDirectory(prefix="mk-trace-") as d:
                with jax.profiler.trace(d):
                    for i in range(iters):
                        out = compiled(*sets[i % len(sets)])
                        _sync(out)
                dev = device_event_durations(_trace_planes(jax, d), module, iters)
            if len(dev) >= max(1, iters // 2):
                result["method"] = "device"
                result["device"] = summarize(dev)
        except Exception as e:  # profiler is optional
            result["trace_error"] = "%s: %s" % (type(e).__name__, e)
    result["calls_s"] = _clock() - t_all  # every call above, traced ones included
    s = result.get("device") or result["wall"]
    result["latency_s"] = s["median_s"]
    result["spread"] = s["spread"]
    result["last_output"] = out
    return result


def cmd_bench(a):
    task = load_task(a.task, _overrides(a))
    jax = _jax()
    compiled, args, res = _candidate_compiled(task, a)
    if compiled is None:
        return res
    dyn = [x for x in args]
    try:
        t = time_compiled(jax, compiled, dyn, "jit_mk_candidate", a.warmup, a.iters, not a.no_trace,
                          a.min_time, a.max_iters)
    except BaseException as e:  # whatever the candidate raises (SystemExit too) is its crash
        return {"status": "crash", "phase": "bench", "message": error_text(e, a.candidate)}
    out = t.pop("last_output")
    res.update(t)
    res["device_info"] = device_info(jax)
    cid = (a.case or case_ids(a.tests)[0]) if a.tests else None
    res["case"] = cid
    res["timed_scale"] = timed_scale(a.tests, cid)
    if a.save_output and cid:
        os.makedirs(a.save_output, exist_ok=True)
        ometa = save_arrays(os.path.join(a.save_output, cid + ".bench.npz"), [_to_numpy(o) for o in _leaves(out)])
        with open(os.path.join(a.save_output, cid + ".bench.json"), "w") as f:
            json.dump({"outputs": ometa}, f)
    # The timed runs' output is checked too (against the frozen expected
    # output of the same case), so skipping work while timed is caught.
    if a.tests and a.check_output:
        with open(os.path.join(a.tests, "expected", cid + ".json")) as f:
            emeta = json.load(f)
        want = load_arrays(os.path.join(a.tests, "expected", cid + ".npz"), emeta["outputs"], True)
        got = [_to_numpy(o) for o in _leaves(out)]
        got = [g.astype("float32") if str(g.dtype) in _EXOTIC else g for g in got]
        tol = task["tolerance"]
        c = compare_outputs(got, want, tol["atol"], tol["rtol"])
        if not c["ok"]:
            return {"status": "incorrect", "phase": "bench", "reason": c["reason"],
                    "message": "output of the timed runs is wrong: " + c["message"]}
    return res


def _cost(compiled):
    try:
        ca = compiled.cost_analysis()
    except Exception:  # no cost analysis on this backend: none reported
        return {}
    if isinstance(ca, (list, tuple)):
        ca = ca[0] if ca else {}
    ca = ca or {}
    return {"flops": float(ca.get("flops", 0) or 0), "bytes": float(ca.get("bytes accessed", 0) or 0),
            "transcendentals": float(ca.get("transcendentals", 0) or 0)}


def _io_bytes(args, out):
    return float(sum(getattr(x, "nbytes", 0) for x in list(args) + list(_leaves(out))))


def cmd_profile(a):
    task = load_task(a.task, _overrides(a))
    jax = _jax()
    compiled, args, res = _candidate_compiled(task, a)
    if compiled is None:
        return res
    cost = _cost(compiled)
    flops_src, bytes_src = "cost_analysis", "cost_analysis"
    if not cost.get("flops"):
        # A pallas_call is opaque to XLA's cost model unless it passes a
        # CostEstimate: fall back to the task's own FLOP count.
        ref = reference_module(task)
        if hasattr(ref, "get_flops"):
            cost["flops"], flops_src = task_flops(ref, _case_config(a)), "task get_flops()"
    latency = a.latency_s
    t = {}
    if not latency:
        t = time_compiled(jax, compiled, list(args), "jit_mk_candidate", a.warmup, a.iters, not a.no_trace,
                          a.min_time, a.max_iters)
        latency = t["latency_s"]
        out = t.pop("last_output")
    else:
        out = compiled(*args)
    if not cost.get("bytes"):
        cost["bytes"], bytes_src = _io_bytes(args, out), "inputs + outputs (lower bound)"
    info = device_info(jax)
    r = roofline(cost.get("flops"), cost.get("bytes"), latency, chip_peaks(info["device_kind"]))
    r["flops_source"], r["bytes_source"] = flops_src, bytes_src
    r["transcendentals"] = cost.get("transcendentals")
    text = roofline_text(r)
    return {"status": "ok", "profile": r, "text": text, "latency_s": latency,
            "method": t.get("method", "given"), "device_info": info, "interpret": res.get("interpret"),
            "timing": res.get("timing")}


def cmd_baseline(a):
    task = load_task(a.task, _overrides(a))
    jax = _jax()
    ref = reference_module(task)
    cid = None
    if a.tests:
        verify_manifest(a.tests, subset={"inputs"})
        cid = a.case or case_ids(a.tests)[0]
        args, statics = frozen_case_inputs(a.tests, cid)
    else:
        args, statics = make_inputs(task, ref, 0, None, _resolve_dtype(a.dtype))
    fn = entry_fn(task, ref, statics)
    try:
        with config_scope(ref, _case_config(a)):
            compiled, times = lower_and_compile(jax, fn, args)
    except CandidateError as e:
        raise HarnessError("bad_task", "the reference does not compile: " + error_text(e.exc))
    t = time_compiled(jax, compiled, args, "jit_mk_reference", a.warmup, a.iters, not a.no_trace,
                      a.min_time, a.max_iters)
    out = t.pop("last_output")
    cost = _cost(compiled)
    if hasattr(ref, "get_flops"):
        cost["flops"] = task_flops(ref, _case_config(a))
    if not cost.get("bytes"):
        cost["bytes"] = _io_bytes(args, out)
    info = device_info(jax)
    r = roofline(cost.get("flops"), cost.get("bytes"), t["latency_s"], chip_peaks(info["device_kind"]))
    res = {"status": "ok", **times, **t, "flops": cost.get("flops"), "bytes": cost.get("bytes"),
           "profile": r, "text": roofline_text(r, "XLA baseline"), "device_info": info, "timing": "device",
           "case": cid, "timed_scale": timed_scale(a.tests, cid)}
    return res


def _int_list(s):
    if not s:
        return []
    return [int(x) for x in str(s).replace(" ", "").split(",") if x != ""]


def _params(a):
    if not getattr(a, "params", None):
        return {}
    p = json.loads(a.params)
    if not isinstance(p, dict):
        raise HarnessError("bad_args", "--params must be a JSON object")
    return p


def build_parser():
    p = argparse.ArgumentParser(prog="harness.py", description="mkengine Pallas target harness")
    sub = p.add_subparsers(dest="cmd", required=True)

    def add(name, fn, task=True, candidate=False, tests=None, timing=False):
        s = sub.add_parser(name)
        s.set_defaults(fn=fn)
        if task:
            s.add_argument("--task", required=True, help="task directory")
            s.add_argument("--atol", type=float)
            s.add_argument("--rtol", type=float)
            s.add_argument("--name")
            s.add_argument("--config-index", type=int, default=0,
                           help="index into per-configuration atol/rtol lists")
            s.add_argument("--dtype", help="dtype passed to create_inputs/get_inputs (e.g. bfloat16)")
        if candidate:
            s.add_argument("--candidate", required=True, help="candidate kernel.py")
            s.add_argument("--params", help="JSON object of tunable values")
            s.add_argument("--interpret", nargs="?", const="plain",
                           default=os.environ.get("MK_PALLAS_INTERPRET") or "auto",
                           help="auto (TPU interpret mode on a CPU backend, native otherwise), tpu, "
                                "plain (interpret=True on every pallas_call) or off; bare --interpret = plain")
            s.add_argument("--chip", default=os.environ.get("MK_PALLAS_CHIP") or DEFAULT_CHIP,
                           help="device_kind the kernel sees in TPU interpret mode (default %r)" % DEFAULT_CHIP)
        if tests is not None:
            s.add_argument("--tests", required=tests, help="frozen tests directory")
            s.add_argument("--case", help="case id for compile/bench inputs")
        if timing:
            s.add_argument("--warmup", type=int, default=3)
            s.add_argument("--iters", type=int, default=20)
            s.add_argument("--no-trace", action="store_true", help="wall time only")
            s.add_argument("--min-time", type=float, default=0.0, help="seconds of timed calls to aim for")
            s.add_argument("--max-iters", type=int, default=1000)
        return s

    add("load", cmd_load)
    s = add("tunables", cmd_tunables, task=False)
    s.add_argument("--candidate", required=True)
    s = add("freeze", cmd_freeze, tests=True)
    s.add_argument("--seeds", default="0,1", help="search seeds; 0 = the task's own inputs")
    s.add_argument("--heldout", default="1001", help="held-out seeds")
    s.add_argument("--test-scale", default=os.environ.get("MK_PALLAS_TEST_SCALE") or "auto",
                   help="test sizes: auto (search from the largest size at about %d on a CPU backend; the "
                        "task's own on a device), off, or that size" % TEST_SCALE_TARGET)
    s.add_argument("--scale-factor", type=int, help="freeze at exactly this scale factor (no search)")
    s.add_argument("--scale-tier", choices=("widths",), help="with --scale-factor: scale only the width sizes")
    s = add("verify", cmd_verify, task=False)
    s.add_argument("--tests", required=True, help="frozen tests directory")
    add("compile", cmd_compile, candidate=True, tests=False)
    for name, fn in (("run", cmd_run), ("check", cmd_check), ("test", cmd_test)):
        s = add(name, fn, candidate=(name != "check"), tests=True)
        s.add_argument("--cases", help="comma-separated case ids (default: all search cases)")
        s.add_argument("--heldout-cases", action="store_true", help="use the held-out cases")
        if name in ("run", "check"):
            s.add_argument("--outputs", required=True, help="directory of the candidate's outputs")
        if name == "check":
            s.add_argument("--calls", default="first,repeat", help="output sets to check (bench: 'bench')")
            s.add_argument("--present-only", action="store_true",
                           help="check the outputs a run that ran out of time left, skip the missing")
    s = add("bench", cmd_bench, candidate=True, tests=False, timing=True)
    s.add_argument("--no-check-output", dest="check_output", action="store_false",
                   help="do not read the expected output here (check it with `check --calls bench`)")
    s.add_argument("--save-output", help="write the timed runs' output as <case>.bench.npz there")
    s = add("profile", cmd_profile, candidate=True, tests=False, timing=True)
    s.add_argument("--latency-s", type=float)
    add("baseline", cmd_baseline, tests=False, timing=True)
    return p


_PARSERS = []


def _parser():
    """build_parser(), made once per process (a session's steps share it)."""
    if not _PARSERS:
        _PARSERS.append(build_parser())
    return _PARSERS[0]


def _json_default(o):
    try:
        import numpy as np
        if isinstance(o, np.generic):
            return o.item()
    except ImportError:
        pass
    return str(o)


def _clean(o):
    """JSON has no NaN/Inf: map them to null."""
    if isinstance(o, float) and not math.isfinite(o):
        return None
    if isinstance(o, dict):
        return {k: _clean(v) for k, v in o.items()}
    if isinstance(o, (list, tuple)):
        return [_clean(v) for v in o]
    return o


PROCESS_ID = os.urandom(8).hex()  # names this process in every answer (pids repeat across sandboxes)
ENGINE_GONE_EXIT = 70  # exit status of a harness process whose engine went away


def watch_engine(fd=2, period_s=0.5):
    """End this process when the engine that started it is gone: its end of
    our stderr (a pipe or socket only the engine reads; mk-exec keeps no
    copy) closes, which poll() reports as POLLHUP/POLLERR. Covers an engine
    killed with SIGKILL, where nothing else would stop a pre-started worker
    (it would wait out its idle timeout) or a step still running. A no-op
    when fd is a terminal or a file."""
    import select
    import stat
    import threading
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        return False
    if not (stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)):
        return False

    def loop():
        p = select.poll()
        p.register(fd, select.POLLHUP | select.POLLERR)
        while True:
            for _, ev in p.poll(period_s * 1000):
                if ev & (select.POLLHUP | select.POLLERR | select.POLLNVAL):
                    os._exit(ENGINE_GONE_EXIT)
    threading.Thread(target=loop, name="mk-watch-engine", daemon=True).start()
    return True


PHASE = {"now": ""}  # what the step is doing, for the limit messages


def rss_mb():
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 1048576.0
    except (OSError, ValueError, IndexError):
        return 0.0


def peak_rss_mb():
    import resource
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def start_limits(out, step, mem_mb, time_s):
    """End the step with one clear JSON error (kind memory_limit or
    time_limit, exit 3) when its resident memory passes mem_mb MiB or it runs
    past time_s seconds ($MK_PALLAS_MEM_MB, $MK_PALLAS_TIME_S; 0 = none).
    No RLIMIT_AS: JAX reserves far more address space than it uses. Returns
    an event that stops the watch when set."""
    import threading
    done = threading.Event()  # set when the step ends (a session's next step has its own watch)
    if not mem_mb and not time_s:
        return done
    end = time.monotonic() + time_s if time_s else None

    def watch():
        while not done.wait(0.05):
            used = rss_mb()
            if mem_mb and used > mem_mb:
                kind, why = "memory_limit", "used %.0f MiB, over its limit of %d MiB" % (used, mem_mb)
            elif end and time.monotonic() > end:
                kind, why = "time_limit", "ran past its limit of %g s" % time_s
            else:
                continue
            msg = "harness %s %s%s" % (step, why, " while " + PHASE["now"] if PHASE["now"] else "")
            out.write(json.dumps({"status": "error", "command": step, "error": {"kind": kind, "message": msg},
                                  "peak_rss_mb": max(used, peak_rss_mb())}) + "\n")
            out.flush()
            os._exit(3)
    threading.Thread(target=watch, daemon=True).start()
    return done


def _env_number(name):
    try:
        return float(os.environ.get(name) or 0)
    except ValueError:
        return 0.0


def _cpu_s():
    import resource
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def run_step(argv, out):
    """Run one step (`argv` = [step, args...]): its JSON object and the exit
    code (`out`: where a limit's message goes). `cpu_s`: the CPU seconds the
    step used (a session's steps share a process, so its rusage is not
    theirs)."""
    try:
        args = _parser().parse_args(argv)
    except SystemExit as e:
        return {"status": "error", "error": {"kind": "bad_args", "message": "bad arguments"}}, (2 if e.code else 0)
    code = 0
    del _SCALE_HINTS[:]
    _CASE_HINTS.clear()
    PHASE["now"] = ""
    cpu0, t0 = _cpu_s(), time.monotonic()
    limits = start_limits(out, args.cmd, _env_number("MK_PALLAS_MEM_MB"), _env_number("MK_PALLAS_TIME_S"))
    try:
        res = args.fn(args)
    except HarnessError as e:
        res = {"status": "error", "error": {"kind": e.kind, "message": e.message}}
        code = 3
    except BaseException as e:  # a harness bug must still answer in JSON
        res = {"status": "error", "error": {"kind": "harness", "message": error_text(e) + "\n" + traceback.format_exc()[-3000:]}}
        code = 3
    finally:
        limits.set()
    res.setdefault("command", args.cmd)
    res["harness_version"] = HARNESS_VERSION
    res["peak_rss_mb"] = peak_rss_mb()
    res["cpu_s"] = _cpu_s() - cpu0
    res["step_s"] = time.monotonic() - t0  # the step inside this process (its start and JAX import apart)
    res["pid"] = os.getpid()  # inside a sandbox: in its own pid namespace
    res["process"] = PROCESS_ID
    if "jax" in sys.modules:  # the backend a JAX step ran on (the engine keeps no session on a TPU)
        try:
            res.setdefault("platform", sys.modules["jax"].default_backend())
        except Exception:  # no backend could start: the step's own error says why
            pass
    if _SESSION.get("on"):
        _SESSION["steps"] = _SESSION.get("steps", 0) + 1
        res["session_step"] = _SESSION["steps"]  # 1 for the first step this process ran
    return _clean(res), code


def answer(out, res):
    out.write(json.dumps(res, default=_json_default) + "\n")
    out.flush()


def _own_stdout():
    """Candidate code may print: keep the real stdout for our JSON objects
    and send everything else (fd 1 included) to stderr."""
    out_fd = os.dup(1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return os.fdopen(out_fd, "w")


def main(argv=None):
    out = _own_stdout()
    res, code = run_step(argv, out)
    answer(out, res)
    return code


def warm_up(jax):
    """What every candidate's first steps would pay in a new process, paid
    ahead: the backend, and the fill compiled for poison_device()."""
    jax.devices()
    poison_device(jax)


def _request_lines(fd, idle_s):
    """Lines read from fd (requests, one JSON object each) until EOF or
    idle_s seconds without one."""
    import select
    buf = b""
    while True:
        while b"\n" not in buf:
            ready, _, _ = select.select([fd], [], [], idle_s)
            if not ready:
                return
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                return
            buf += chunk
        line, buf = buf.split(b"\n", 1)
        if line.strip():
            yield line


STEP_OUTPUT_KEEP = 64 << 10  # bytes of a session step's output kept (its tail)


class _StepOutput:
    """fds 1 and 2 sent to a pipe while a session's step runs; a thread
    keeps the tail of what comes (STEP_OUTPUT_KEEP bytes, however much the
    candidate prints) in the file `path`, which the engine reads for the
    step's stderr, also after a crash. Restored when the step ends."""

    def __init__(self, path):
        self.path, self.saved, self.thread = path, None, None

    def _drain(self, rfd, wfd):
        tail, size = b"", 0
        try:
            while True:
                chunk = os.read(rfd, 1 << 16)
                if not chunk:
                    return
                tail = (tail + chunk)[-STEP_OUTPUT_KEEP:]
                if size + len(chunk) > 16 * STEP_OUTPUT_KEEP:  # start again from the tail: the file stays small
                    os.ftruncate(wfd, 0)
                    os.lseek(wfd, 0, os.SEEK_SET)
                    size = os.write(wfd, tail)
                else:
                    size += os.write(wfd, chunk)
        finally:
            os.close(rfd)
            os.close(wfd)

    def __enter__(self):
        import threading
        if self.path:
            sys.stderr.flush()
            self.saved = os.dup(2)
            rfd, pw = os.pipe()
            wfd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            self.thread = threading.Thread(target=self._drain, args=(rfd, wfd), name="mk-step-output", daemon=True)
            self.thread.start()
            os.dup2(pw, 1)
            os.dup2(pw, 2)
            os.close(pw)
        return self

    def __exit__(self, *exc):
        if self.saved is not None:
            sys.stderr.flush()
            os.dup2(self.saved, 1)  # the pipe's last writers closed: the thread reads its end
            os.dup2(self.saved, 2)
            os.close(self.saved)
            self.thread.join(10)
        return False


def serve(idle_s):
    """A session: steps of one candidate read from stdin, one JSON line each
    ({"argv": [step, args...], "cwd": dir, "stderr": file}), run in order in
    this process; for each, the line {"started": step} and then the step's
    JSON object on stdout. Ends at EOF or after idle_s seconds without a
    request. Candidate state (its module, its executables) is kept between
    the steps; a second candidate is refused (load_candidate)."""
    out = _own_stdout()
    _SESSION["on"] = True
    for line in _request_lines(0, idle_s):
        try:
            req = json.loads(line)
            argv = [str(x) for x in req["argv"]]
        except (ValueError, KeyError, TypeError) as e:
            answer(out, {"status": "error", "error": {"kind": "bad_args", "message": "bad session request: %s" % e}})
            continue
        out.write(json.dumps({"started": argv[0] if argv else ""}) + "\n")
        out.flush()
        if req.get("cwd"):
            os.chdir(req["cwd"])
        with _StepOutput(req.get("stderr")):
            res, _ = run_step(argv, out)
        answer(out, res)  # after the step's output is in its file
    return 0


def worker(argv):
    """`harness.py worker --inbox DIR [--idle S] [--light] [--session [--warm]]`:
    a pre-started harness process. It imports JAX and Pallas (the slow part
    of every step; numpy only with --light, for `check`), then
    waits for DIR/request.json ({"argv": [step, args...], "cwd": dir}),
    runs that one step exactly as `harness.py <step> <args...>` would, and
    exits: one step per process, so candidates stay isolated from each other;
    only the import is paid ahead of time. Exits 0 without output when DIR
    disappears or after S idle seconds (default 600). The step's timeout is
    the engine's: it kills the process.
    With --session it serves one candidate's steps read from stdin instead
    (serve(): compile, run, bench, profile in the order the engine sends
    them, the JAX set-up paid once); --warm also initialises the JAX backend
    ahead (never on a TPU host: an idle process would hold the chip)."""
    p = argparse.ArgumentParser(prog="harness.py worker")
    p.add_argument("--inbox", required=True)
    p.add_argument("--idle", type=float, default=600.0)
    p.add_argument("--light", action="store_true", help="import numpy only (for `check`, which never imports JAX)")
    p.add_argument("--session", action="store_true", help="serve one candidate's steps from stdin")
    p.add_argument("--warm", action="store_true", help="initialise the JAX backend before the first step")
    a = p.parse_args(argv)
    watch_engine(os.dup(2))  # a copy: a session's steps send fd 2 to their own file
    # Pay the imports ahead of time (by name: nothing here uses them).
    preload = ["numpy"] if a.light else [
        "numpy", "jax", "jax.experimental.pallas", "jax.experimental.pallas.tpu"]
    try:
        for name in preload:
            importlib.import_module(name)
        if a.warm and not a.light:
            warm_up(_jax())
    except Exception:  # a missing JAX or a backend that cannot start: the step reports it itself
        pass
    if a.session:
        return serve(a.idle)
    req_path = os.path.join(a.inbox, "request.json")
    deadline = time.monotonic() + a.idle
    while not os.path.exists(req_path):
        if time.monotonic() > deadline or not os.path.isdir(a.inbox):
            return 0
        time.sleep(0.005)
    with open(req_path) as f:
        req = json.load(f)
    os.remove(req_path)
    if req.get("cwd"):
        os.chdir(req["cwd"])
    return main([str(x) for x in req["argv"]])
