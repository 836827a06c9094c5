#!/usr/bin/env python3
"""Native Pallas on an accelerator: every kernel of the real scripted banks
(examples/tasks/pallas/rmsnorm and examples/suites/pallas/*/scripted), on
the task's own shapes, with the backend picked by the first argument:

  triton      GPU, Pallas -> Triton (JAX_PALLAS_USE_MOSAIC_GPU off)
  mosaic_gpu  GPU, Pallas -> Mosaic GPU (the default of JAX 0.10+)
  native      whatever the backend lowers to (TPU: Mosaic TPU)

One process for all kernels (a device check, not an evaluation: no
isolation needed). Per kernel: lower + compile, run on the task's inputs,
compare with the reference (the harness's comparison and tolerance), and
for correct ones time kernel and reference (the harness's timing: device
trace events where the profiler gives them, else wall). Kernels written for
the TPU may not lower on a GPU: that is recorded ("lower" / "compile"),
not hidden. Writes one JSON object (backend, device, per task: baseline
latency, per kernel: status, expect, latency, speedup) to the path given
by --out and prints a table.

Usage: python3 scripts/device_bench.py BACKEND --out FILE [--iters N] [--only TASK,...]
"""
import argparse
import glob
import json
import os
import re
import sys
import time
import traceback

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "targets", "pallas"))
import harness as H  # the package targets/pallas/harness/, after sys.path names its parent
from harness import arrays, jaxcall, protocol


def banks():
    """(task dir, bank dir, {kernel id: (file, expect)}) of every real bank."""
    out = []
    dirs = [os.path.join(ROOT, "examples", "tasks", "pallas", "rmsnorm")]
    dirs += sorted(glob.glob(os.path.join(ROOT, "examples", "suites", "pallas", "*")))
    for d in dirs:
        bank = os.path.join(d, "scripted", "bank.lua")
        if not os.path.isfile(bank):
            continue
        text = open(bank).read()
        prefix = re.search(r'local T = "([^"]*)"', text)
        kernels = {}
        for kid, expr, expect in re.findall(r'(\w+) = \{ file = ([^,]+), expect = "(\w+)"', text):
            f = expr.strip()
            f = (prefix.group(1) if prefix else "") + re.search(r'"([^"]+)"\s*$', f).group(1)
            kernels[kid] = (os.path.normpath(os.path.join(d, "scripted", f)), expect)
        out.append((d, kernels))
    return out


def reference_outputs(jax, task, ref, dyn, statics):
    want = [jaxcall._to_numpy(o) for o in jaxcall._leaves(jax.jit(H.entry_fn(task, ref, statics))(*dyn))]
    return [w.astype("float32") if str(w.dtype) in arrays._EXOTIC else w for w in want]


def check_kernel(jax, task, path, dyn, statics, want, mode="off"):
    """Compile and run one bank kernel in this process and compare it with
    the reference outputs `want`: ({"status": ok | incorrect |
    compile_error | crash, ...}, compiled or None). In TPU interpret mode a
    race or out-of-bounds access is `incorrect` with its reason."""
    k = {}
    try:
        mod = H.load_candidate(path, {}, mode)
        fn = H.entry_fn(task, mod, statics)
        compiled, times = H.lower_and_compile(jax, fn, dyn, path, mode)
        k.update(times)
        out, verdict = H.call_checked(compiled, list(dyn), mode, path)
        if verdict:
            k.update(status="incorrect", reason=verdict["reason"], message=verdict["message"][:300])
            return k, None
        got = [jaxcall._to_numpy(o) for o in jaxcall._leaves(out)]
        got = [g.astype("float32") if str(g.dtype) in arrays._EXOTIC else g for g in got]
        c = H.compare_outputs(got, want, task["tolerance"]["atol"], task["tolerance"]["rtol"])
        if not c["ok"]:
            k.update(status="incorrect", reason=c["reason"], message=c["message"][:300])
            return k, None
        k["status"] = "ok"
        return k, compiled
    except H.CandidateError as e:
        k.update(status="compile_error", phase=e.phase, message=H.error_text(e.exc, path)[:400])
    except Exception as e:  # a device check records, it does not stop
        k.update(status="crash", message=("%s: %s" % (type(e).__name__, e))[:400],
                 trace=traceback.format_exc()[-800:])
    return k, None


def main():
    p = argparse.ArgumentParser()
    p.add_argument("backend", choices=("triton", "mosaic_gpu", "native"))
    p.add_argument("--out", required=True)
    p.add_argument("--iters", type=int, default=20)
    p.add_argument("--only", default="")
    a = p.parse_args()
    if a.backend in ("triton", "mosaic_gpu"):
        os.environ["JAX_PALLAS_USE_MOSAIC_GPU"] = "1" if a.backend == "mosaic_gpu" else "0"
    jax = jaxcall._jax()
    jax.config.update("jax_pallas_use_mosaic_gpu", a.backend == "mosaic_gpu")
    info = H.device_info(jax)
    result = {"backend": a.backend, "device": info, "tasks": {}}
    only = set(x for x in a.only.split(",") if x)
    t_start = time.time()
    for tdir, kernels in banks():
        task = H.load_task(tdir)
        if only and task["name"] not in only and os.path.basename(tdir) not in only:
            continue
        key = os.path.relpath(tdir, ROOT)
        ref = H.reference_module(task)
        dyn, statics = H.make_inputs(task, ref, 0, None, None)
        want = reference_outputs(jax, task, ref, dyn, statics)
        bc, _ = H.lower_and_compile(jax, H.entry_fn(task, ref, statics), dyn)
        base = H.time_compiled(jax, bc, dyn, "jit_mk_reference", 3, a.iters, True)
        base.pop("last_output", None)
        row = {"baseline_s": base["latency_s"], "baseline_method": base["method"], "kernels": {}}
        result["tasks"][key] = row
        for kid, (path, expect) in sorted(kernels.items()):
            k, compiled = check_kernel(jax, task, path, dyn, statics, want)
            k["expect"] = expect
            row["kernels"][kid] = k
            if compiled is not None:
                try:
                    t = H.time_compiled(jax, compiled, dyn, "jit_mk_candidate", 3, a.iters, True)
                    k.update(latency_s=t["latency_s"], method=t["method"], speedup=base["latency_s"] / t["latency_s"])
                except Exception as e:  # a device check records, it does not stop
                    k.update(status="crash", message=("%s: %s" % (type(e).__name__, e))[:400])
    result["wall_s"] = time.time() - t_start
    with open(a.out, "w") as f:
        json.dump(protocol._clean(result), f, indent=1, default=protocol._json_default)
    print("backend %s on %s (%s), %.0f s" % (a.backend, info["device_kind"], info["platform"], result["wall_s"]))
    for key, row in result["tasks"].items():
        print("  %s: XLA %.4g ms (%s)" % (key, row["baseline_s"] * 1e3, row["baseline_method"]))
        for kid, k in row["kernels"].items():
            extra = ("%.4g ms, %.2fx" % (k["latency_s"] * 1e3, k["speedup"])) if k["status"] == "ok" else \
                (k.get("phase", "") + " " + k.get("message", "")[:100].replace("\n", " "))
            print("    %-18s expect %-13s %-13s %s" % (kid, k["expect"], k["status"], extra))
    return 0


if __name__ == "__main__":
    sys.exit(main())
