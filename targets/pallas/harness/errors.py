"""The harness's errors, and an error as a model reads it.

HarnessError is not the candidate's fault (a bad task, no JAX, a tampered
suite: the step answers {"status": "error"} and exits 3); CandidateRejected
(the screen refused it) and CandidateError (it failed to import, lower or
compile) are, and become its verdict. error_text gives an exception's text
with the candidate's frames, its path shown as kernel.py."""

import os
import re
import traceback


class HarnessError(Exception):
    """An expected failure that is not the candidate's fault (bad task, no JAX)."""

    def __init__(self, kind, message):
        super().__init__(message)
        self.kind = kind
        self.message = message


class CandidateRejected(Exception):
    """The candidate broke a rule (screen.py, scan_candidate)."""


class CandidateError(Exception):
    def __init__(self, phase, exc):
        super().__init__(str(exc))
        self.phase, self.exc = phase, exc


def error_text(exc, candidate_path=None, limit=6000):
    """Exception text for an LLM: type, message, and the candidate's frames."""
    msg = "%s: %s" % (type(exc).__name__, exc)
    if getattr(exc, "mk_note", None):
        msg = "%s: %s" % (exc.mk_note, msg)
    frames = traceback.extract_tb(exc.__traceback__)
    mine = [f for f in frames if candidate_path and os.path.abspath(f.filename) == os.path.abspath(candidate_path)]
    if candidate_path:
        msg = name_candidate(msg, candidate_path)
    if isinstance(exc, SyntaxError) and exc.lineno:
        mine_txt = "kernel.py:%s: %s" % (exc.lineno, (exc.text or "").rstrip())
        msg = mine_txt + "\n" + msg
    elif mine:
        msg = "\n".join("kernel.py:%d in %s: %s" % (f.lineno, f.name, (f.line or "").strip()) for f in mine) + "\n" + msg
    elif candidate_path:
        # Errors raised while lowering (after tracing) carry no candidate
        # frame, but Pallas names the kernel's source line in the text.
        m = re.search(r"kernel\.py:(\d+)", msg)
        if m:
            msg = "kernel.py:%s: %s\n%s" % (m.group(1), _source_line(candidate_path, int(m.group(1))), msg)
    if len(msg) > limit:
        msg = msg[:limit // 2] + "\n...[truncated]...\n" + msg[-limit // 2:]
    return msg


def name_candidate(text, candidate_path):
    """The candidate's absolute path, as JAX prints it, shown as kernel.py."""
    return text.replace(os.path.abspath(candidate_path), "kernel.py") if candidate_path else text


def _source_line(path, lineno):
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
        return lines[lineno - 1].strip() if 0 < lineno <= len(lines) else ""
    except OSError:
        return ""


def classify_compile_error(text):
    if "Mosaic failed to compile" in text:
        return "mosaic"
    if "RESOURCE_EXHAUSTED" in text and "vmem" in text.lower():
        return "vmem_oom"
    if "RESOURCE_EXHAUSTED" in text:
        return "oom"
    return "xla"


def candidate_failure(err, candidate_path):
    text = error_text(err.exc, candidate_path)
    out = {"status": "compile_error", "phase": err.phase, "message": text}
    if err.phase == "compile":
        out["kind"] = classify_compile_error(text)
    elif err.phase == "lower":
        out["kind"] = "lowering"
    else:
        out["kind"] = "import"
    return out
