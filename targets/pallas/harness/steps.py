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
import importlib.util
import json
import os
import sys
import time
import traceback

from .errors import CandidateError, CandidateRejected, HarnessError, candidate_failure, error_text
from .tasks import _overrides, _read, load_task
from .tunables import parse_tunables
from .suite import case_ids, read_case, read_cases, verify_manifest
from .arrays import _EXOTIC, load_arrays, save_arrays, write_json
from .compare import check_outputs, compare_outputs
from .jaxcall import _clock, _jax, _leaves, _to_numpy, device_info, poison_device
from .timing import time_compiled
from .roofline import _cost, _io_bytes, chip_peaks, roofline, roofline_text, task_flops
from .inputs import _resolve_dtype, config_scope, entry_fn, frozen_case_inputs, make_inputs, reference_module
from .interpret import ProgressFile, interpret_mode
from .races import call_checked
from .chip import DEFAULT_CHIP
from .escalation import Rescale, _CASE_HINTS, _SCALE_HINTS, rescale_instead, traces_at_own_sizes
from .candidate import _SESSION, exec_key, load_candidate, lower_and_compile, lower_checked
from .protocol import HARNESS_VERSION, PROCESS_ID, _clean, _own_stdout, answer
from .limits import PHASE, _cpu_s, _env_number, peak_rss_mb, start_limits, watch_engine
from .freeze import TEST_SCALE_TARGET, cmd_freeze, cmd_verify


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
