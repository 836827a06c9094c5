"""Pre-started harness processes (`worker`): JAX imported ahead, then one
step read from an inbox file, or (`--session`) one candidate's steps read
from stdin, its module and executables kept between them."""

import argparse
import importlib
import json
import os
import sys
import time

from .jaxcall import _jax, poison_device
from .candidate import _SESSION
from .protocol import _own_stdout, answer
from .limits import watch_engine
from .cli import main, run_step


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


class _StepEnv:
    """A request's environment ({"MK_PALLAS_MEM_MB": "4096"}: the step's
    memory limit, which the engine sets per evaluation) set for its step
    only; what it replaced is restored when the step ends."""

    def __init__(self, env):
        self.env = {str(k): str(v) for k, v in (env or {}).items()} if isinstance(env, dict) else {}
        self.saved = {}

    def __enter__(self):
        for k, v in self.env.items():
            self.saved[k] = os.environ.get(k)
            os.environ[k] = v
        return self

    def __exit__(self, *exc):
        for k, v in self.saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        return False


def serve(idle_s):
    """A session: steps of one candidate read from stdin, one JSON line each
    ({"argv": [step, args...], "cwd": dir, "stderr": file, "env": {NAME:
    value}}: env set for that step only), run in order in this process; for each, the line {"started": step} and then the step's
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
        with _StepOutput(req.get("stderr")), _StepEnv(req.get("env")):
            res, _ = run_step(argv, out)
        answer(out, res)  # after the step's output is in its file
    return 0


def worker(argv):
    """`harness worker --inbox DIR [--idle S] [--light] [--session [--warm]]`:
    a pre-started harness process. It imports JAX and Pallas (the slow part
    of every step; numpy only with --light, for `check`), then
    waits for DIR/request.json ({"argv": [step, args...], "cwd": dir,
    "env": {NAME: value}}),
    runs that one step exactly as `harness <step> <args...>` would, and
    exits: one step per process, so candidates stay isolated from each other;
    only the import is paid ahead of time. Exits 0 without output when DIR
    disappears or after S idle seconds (default 600). The step's timeout is
    the engine's: it kills the process.
    With --session it serves one candidate's steps read from stdin instead
    (serve(): compile, run, bench, profile in the order the engine sends
    them, the JAX set-up paid once); --warm also initialises the JAX backend
    ahead (never on a TPU host: an idle process would hold the chip)."""
    p = argparse.ArgumentParser(prog="harness worker")
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
    with _StepEnv(req.get("env")):
        return main([str(x) for x in req["argv"]])
