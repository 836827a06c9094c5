"""The roofline of a timed call: its cost (XLA's cost analysis, else the
task's get_flops() and the bytes in and out), the chip's peaks, the rates
achieved and what bounds them, as numbers and as a sentence for a model."""

import re

from .jaxcall import _leaves


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
