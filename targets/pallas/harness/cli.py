"""A step's command line: its arguments (argparse), the step run under its
limits, and its answer: exit code 0 when a verdict was printed (whatever it
is), 2 on bad arguments, 3 when the environment cannot run the step."""

import argparse
import os
import sys
import time
import traceback

from .errors import HarnessError, error_text
from .chip import DEFAULT_CHIP
from .escalation import _CASE_HINTS, _SCALE_HINTS
from .candidate import _SESSION
from .protocol import HARNESS_VERSION, PROCESS_ID, _clean, _own_stdout, answer
from .limits import PHASE, _cpu_s, _env_number, peak_rss_mb, start_limits
from .freeze import TEST_SCALE_TARGET, cmd_freeze, cmd_verify
from .own_sizes import cmd_sample, cmd_sample_check, cmd_sample_plan, cmd_sample_wide, freeze_own
from .steps import (cmd_baseline, cmd_bench, cmd_check, cmd_compile, cmd_load, cmd_profile, cmd_run, cmd_test,
    cmd_tunables)


def _timing_args(s):
    """The options of a step that times calls (bench, profile, baseline)."""
    s.add_argument("--warmup", type=int, default=3)
    s.add_argument("--iters", type=int, default=20)
    s.add_argument("--no-trace", action="store_true", help="wall time only")
    s.add_argument("--min-time", type=float, default=0.0, help="seconds of timed calls to aim for")
    s.add_argument("--max-iters", type=int, default=1000)
    s.add_argument("--max-time", type=float, default=0.0,
                   help="seconds of timed calls not to pass, by the warm-up's estimate (one call at least; 0: no bound)")


def build_parser():
    p = argparse.ArgumentParser(prog="harness", description="mkengine Pallas target harness")
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
            _timing_args(s)
        return s

    add("load", cmd_load)
    s = add("tunables", cmd_tunables, task=False)
    s.add_argument("--candidate", required=True)
    s = add("freeze", _freeze, tests=True)
    s.add_argument("--seeds", default="0,1", help="search seeds; 0 = the task's own inputs")
    s.add_argument("--heldout", default="1001", help="held-out seeds")
    s.add_argument("--test-scale", default=os.environ.get("MK_PALLAS_TEST_SCALE") or "auto",
                   help="test sizes: auto (search from the largest size at about %d on a CPU backend; the "
                        "task's own on a device), off, or that size" % TEST_SCALE_TARGET)
    s.add_argument("--scale-factor", type=int, help="freeze at exactly this scale factor (no search)")
    s.add_argument("--scale-tier", choices=("widths",), help="with --scale-factor: scale only the width sizes")
    s.add_argument("--own-sampled", action="store_true",
                   help="one case at the task's own sizes for sampled runs: expected outputs, inputs by seed")
    s.add_argument("--base", help="with --own-sampled or --scale-factor: the test scale's suite, on which a "
                                  "reference computed in parts is checked against its unsplit self")
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
    s = add("sample", cmd_sample, candidate=True, tests=True)
    s.add_argument("--outputs", required=True, help="directory of the sampled blocks")
    s.add_argument("--sample-seed", type=int, default=0, help="seed of the random grid points sampled")
    s = add("sample_plan", cmd_sample_plan, candidate=True, tests=False)
    s.add_argument("--sample-seed", type=int, default=0, help="seed of the random grid points sampled")
    s = add("sample_wide", cmd_sample_wide, tests=True)
    s.add_argument("--outputs", required=True, help="directory of the sampled blocks")
    s = add("sample_check", cmd_sample_check, tests=True)
    s.add_argument("--outputs", required=True, help="directory of the sampled blocks")
    s = add("bench", cmd_bench, candidate=True, tests=False, timing=True)
    s.add_argument("--no-check-output", dest="check_output", action="store_false",
                   help="do not read the expected output here (check it with `check --calls bench`)")
    s.add_argument("--save-output", help="write the timed runs' output as <case>.bench.npz there")
    s = add("profile", cmd_profile, candidate=True, tests=False, timing=True)
    s.add_argument("--latency-s", type=float)
    add("baseline", cmd_baseline, tests=False, timing=True)
    return p


def _freeze(a):
    return freeze_own(a) if a.own_sampled else cmd_freeze(a)


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
