"""What every answer of the harness is: one JSON object a line on the real
stdout (candidate code's prints go to stderr), NaN and Inf as null, with
the harness's version and this process's id; a verdict's status is one of
STATUSES."""

import json
import math
import os
import sys


HARNESS_VERSION = 8  # in every answer, and in the cases.json of the suites it freezes
STATUSES = ("ok", "compile_error", "incorrect", "timeout", "crash", "rejected")
# ... and "rescale": no verdict at this (shrunk) test scale (escalation.py)


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
