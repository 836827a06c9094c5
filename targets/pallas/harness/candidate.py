"""The candidate: imported (screened first, its tunables set, in its
interpret mode, seeing its emulated chip), lowered and compiled for a case,
an executable an earlier step of the session compiled reused."""

import hashlib
import json
import os
import time

from .errors import CandidateError, CandidateRejected, HarnessError, error_text
from .tasks import _read
from .screen import scan_candidate
from .jaxcall import _WithStatics, _import_file, _jax, jit_static, static_positions
from .interpret import _install_interpret, tpu_interpret_params
from .chip import emulate_chip
from .escalation import Rescale, _CASE_HINTS, _SCALE_HINTS, case_is_scaled, own_check_raised, watch_pallas_calls
from .work import case_work
from .sampling import install as install_sampling
from .limits import PHASE


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
    if interpret == "tpu":  # inert until a sampled run at the task's own sizes traces (sampling.py)
        install_sampling(jax)
    PHASE["now"] = "importing the candidate"
    try:
        mod = _import_file(path, "mk_candidate")
    except BaseException as e:  # SystemExit from candidate code too
        raise CandidateError("import", e)
    for k, v in (params or {}).items():
        setattr(mod, k, v)
    if _SESSION.get("on"):
        _SESSION.update(module=mod, exec={})
    return mod


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


def exec_key(args, statics, config):
    """What an executable of the candidate depends on besides its module:
    the inputs' shapes and dtypes (Python values as written), the static
    arguments and the case's CONFIG."""
    return json.dumps([[list(x.shape), str(x.dtype)] if hasattr(x, "shape") else repr(x) for x in args]
                      + [repr(statics), config], sort_keys=True, default=str)


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
        PHASE["now"] = "compiling the candidate for case %s" % cid
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
