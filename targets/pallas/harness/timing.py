"""Timing a compiled call: on-device seconds from a jax.profiler trace (the
median of the executable's device events), falling back to wall time. The
statistics and the trace-event logic are pure; JAX is imported when a call
is timed."""

import math
import os

from .jaxcall import _clock, _sync


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


def plan_iters(iters, min_time, max_iters, est_s, max_time=0.0):
    """Timed calls: at least `iters`, more until about min_time seconds of
    calls (estimated from one call), never more than max_iters, nor more
    than max_time seconds of calls by the estimate (one call at least: an
    interpreted 7p call takes 50 s)."""
    n = max(1, int(iters))
    if min_time and est_s and est_s > 0:
        n = max(n, int(math.ceil(min_time / est_s)))
    if max_iters:
        n = min(n, int(max_iters))
    if max_time and est_s and est_s > 0:
        n = min(n, max(1, int(max_time // est_s)))
    return n


def time_compiled(jax, compiled, args, module, warmup=3, iters=20, use_trace=True, min_time=0.0, max_iters=1000,
                  max_time=0.0):
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
    # one call past the bound (7p interpreted: 48 s) is the timing: nothing more is run
    warmup_only = bool(max_time) and est > max_time
    iters = 0 if warmup_only else plan_iters(iters, min_time, max_iters, est, max_time)
    wall = [est] if warmup_only else []
    for i in range(iters):
        t0 = _clock()
        out = compiled(*sets[i % len(sets)])
        _sync(out)
        wall.append(_clock() - t0)
    result = {"method": "wall", "wall": summarize(wall)}
    if warmup_only:
        result["warmup_only"] = True
    if use_trace and iters:
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
