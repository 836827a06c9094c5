"""The steps of a candidate and of the reference: load, tunables, compile,
run, check, test, bench, profile, baseline (`cmd_<step>(args)` returns the
step's answer). `freeze` and `verify` are freeze.py's."""

import json
import math
import os
import sys

from .errors import CandidateError, CandidateRejected, HarnessError, candidate_failure, error_text
from .tasks import _overrides, _read, load_task
from .tunables import parse_tunables
from .suite import case_entry, case_ids, read_case, read_cases, verify_manifest
from .arrays import _EXOTIC, load_arrays, save_arrays, write_json
from .compare import check_outputs, compare_outputs
from .jaxcall import _clock, _jax, _leaves, _to_numpy, device_info, poison_device
from .timing import time_compiled
from .roofline import _cost, _io_bytes, chip_peaks, roofline, roofline_text, task_flops
from .inputs import _resolve_dtype, config_scope, entry_fn, frozen_case_inputs, make_inputs, reference_module
from .interpret import ProgressFile, interpret_mode
from .races import call_checked
from .escalation import Rescale, _CASE_HINTS, rescale_instead, traces_at_own_sizes
from .candidate import exec_key, load_candidate, lower_and_compile, lower_checked
from .limits import PHASE
from . import chunked


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
    mod, failed = candidate_module(a, mode)
    if failed:
        return failed
    progress = ProgressFile(a.outputs)
    try:
        return _run_cases(task, jax, a, mod, mode, cases, progress)
    finally:
        progress.close()


def candidate_module(a, mode):
    """(the candidate's module, None), or (None, its verdict: rejected by
    the screen, or failed to import)."""
    try:
        return load_candidate(a.candidate, _params(a), mode, a.chip), None
    except CandidateRejected as e:
        return None, {"status": "rejected", "message": "kernel.py breaks the rules: %s" % e}
    except CandidateError as e:
        return None, candidate_failure(e, a.candidate)


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
            PHASE["now"] = "running case %s (%s call)" % (cid, call)
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


def _timed(jax, compiled, args, module, a):
    """time_compiled with a timing step's options (--warmup, --iters,
    --no-trace, --min-time, --max-iters, --max-time)."""
    return time_compiled(jax, compiled, args, module, a.warmup, a.iters, not a.no_trace, a.min_time, a.max_iters,
                         a.max_time)


def cmd_bench(a):
    task = load_task(a.task, _overrides(a))
    jax = _jax()
    compiled, args, res = _candidate_compiled(task, a)
    if compiled is None:
        return res
    dyn = [x for x in args]
    PHASE["now"] = "timing the candidate"
    try:
        t = _timed(jax, compiled, dyn, "jit_mk_candidate", a)
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
        tol = case_entry(a.tests, cid).get("tolerance") or task["tolerance"]  # its configuration's own
        c = compare_outputs(got, want, tol["atol"], tol["rtol"])
        if not c["ok"]:
            return {"status": "incorrect", "phase": "bench", "reason": c["reason"],
                    "message": "output of the timed runs is wrong: " + c["message"]}
    return res


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
        t = _timed(jax, compiled, list(args), "jit_mk_candidate", a)
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
    parts = _case_chunks(a.tests, cid)
    try:
        with config_scope(ref, _case_config(a)):
            compiled, times = lower_and_compile(jax, fn, args)
            if parts:  # frozen in parts (too large whole for a harness process): run as it was frozen
                whole, compiled = compiled, lower_and_compile(jax, chunked.in_parts(jax, fn, parts), args)[0]
    except CandidateError as e:
        raise HarnessError("bad_task", "the reference does not compile: " + error_text(e.exc))
    t = _timed(jax, compiled, args, "jit_mk_reference", a)
    out = t.pop("last_output")
    cost = _cost(whole if parts else compiled)  # a loop's cost analysis counts its body once
    if hasattr(ref, "get_flops"):
        cost["flops"] = task_flops(ref, _case_config(a))
    if not cost.get("bytes"):
        cost["bytes"] = _io_bytes(args, out)
    info = device_info(jax)
    r = roofline(cost.get("flops"), cost.get("bytes"), t["latency_s"], chip_peaks(info["device_kind"]))
    text = roofline_text(r, "XLA baseline")
    if parts:
        text += " [the reference computed in %d equal parts, one after another, as frozen]" % math.prod(parts.values())
    res = {"status": "ok", **times, **t, "flops": cost.get("flops"), "bytes": cost.get("bytes"),
           "profile": r, "text": text, "device_info": info, "timing": "device",
           "case": cid, "timed_scale": timed_scale(a.tests, cid), "parts": parts}
    return res


def _case_chunks(tests_dir, cid):
    """The equal parts ({axis: parts}) the reference of case `cid` was
    frozen in (cases.json test_scale "chunks", its configuration's own
    when the suite has several), or None when it ran whole. A suite of the
    task's own sizes (own_sampled) keeps no inputs to time it on."""
    if not tests_dir or not cid:
        return None
    rec = read_cases(tests_dir).get("test_scale")
    if not isinstance(rec, dict) or rec.get("own_sampled"):
        return None
    k = case_entry(tests_dir, cid).get("configuration")
    for c in rec.get("configurations") or []:
        if k is not None and c.get("configuration") == k:
            rec = c
    chunks = rec.get("chunks")
    return {int(p): int(m) for p, m in chunks.items()} if isinstance(chunks, dict) and chunks else None


def _params(a):
    if not getattr(a, "params", None):
        return {}
    p = json.loads(a.params)
    if not isinstance(p, dict):
        raise HarnessError("bad_args", "--params must be a JSON object")
    return p
