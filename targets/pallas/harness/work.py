"""Work inside and outside the Pallas kernels: a kernel whose plain-JAX part
does the reference's work (the reference called in disguise, a matmul in
jnp with a Pallas epilogue, a fallback "off TPU") is no Pallas kernel.
Counted on the traced jaxpr, in the same units for the reference (at
freeze) and the candidate: a contraction 2 x output x contracted size, a
convolution 2 x output x its kernel's size per output channel, a gather the
values it gathers, a scatter the values it scatters, any other computation
the size of its largest operand; moving data counts nothing; a loop's body
counts once per trip."""

import math

from .suite import read_case
from .jaxcall import jit_static


_MOVES = frozenset((
    "reshape", "transpose", "broadcast_in_dim", "squeeze", "expand_dims", "slice", "dynamic_slice",
    "dynamic_update_slice", "concatenate", "pad", "convert_element_type", "copy", "copy_p", "iota",
    "rev", "device_put", "bitcast_convert_type", "stop_gradient", "get", "swap", "load", "store", "masked_load",
    "masked_swap", "dma_start", "dma_wait", "semaphore_signal", "semaphore_wait", "semaphore_read", "program_id",
    "num_programs", "run_scoped", "delay", "optimization_barrier"))


# Indexed reads and writes are work, not data movement: an MoE's dispatch,
# a paged attention's page gather, a histogram's scatter-add are the task.
# A gather counts the values it reads (its output), a scatter the values it
# writes (its updates), never the whole table (an embedding lookup reads a
# few rows of a large one).
_SCATTERS = frozenset(("scatter", "scatter-add", "scatter_add", "scatter-mul", "scatter_mul", "scatter-min",
                       "scatter_min", "scatter-max", "scatter_max", "scatter-apply", "scatter_apply"))


def _size(v):
    return math.prod(getattr(getattr(v, "aval", None), "shape", ()) or ())


def _literal(v):
    """The integer a jaxpr Literal holds, else None (a Var)."""
    if type(v).__name__ != "Literal":
        return None
    try:
        return int(v.val)
    except (TypeError, ValueError):
        return None


def _index(v, seq):
    return next((i for i, x in enumerate(seq) if x is v), None)


def trip_count(eqn):
    """The trips of a `while` whose jaxpr fixes them (a lax.while_loop or a
    fori_loop with Python bounds in a loop JAX does not turn into a scan): a
    counter carried from a literal start, compared `<` with a literal or a
    carried literal bound the body leaves alone, and increased by a
    literal step. None when the count depends on values (a traced bound)."""
    p = eqn.params
    cj, bj, nc, nb = p["cond_jaxpr"].jaxpr, p["body_jaxpr"].jaxpr, p["cond_nconsts"], p["body_nconsts"]
    init, cin, bin_ = list(eqn.invars[nc + nb:]), list(cj.invars[nc:]), list(bj.invars[nb:])
    if len(cj.eqns) != 1 or cj.eqns[0].primitive.name not in ("lt", "gt"):
        return None
    a, b = cj.eqns[0].invars if cj.eqns[0].primitive.name == "lt" else cj.eqns[0].invars[::-1]
    k, j = _index(a, cin), _index(b, cin)
    if k is None:
        return None
    start = _literal(init[k])
    bound = _literal(b) if j is None else (_literal(init[j]) if bj.outvars[j] is bin_[j] else None)
    step = next((_literal(e.invars[1]) for e in bj.eqns if e.primitive.name == "add" and e.outvars[0] is
                 bj.outvars[k] and e.invars[0] is bin_[k]), None)
    if start is None or bound is None or not step or step <= 0:
        return None
    return max(0, -(-(bound - start) // step))


def _trips(eqn):
    """How many times an equation's sub-jaxprs run: a scan's length, a
    while loop's trips when its jaxpr fixes them (else once), once."""
    name = eqn.primitive.name
    if name == "scan":
        return eqn.params.get("length", 1)
    t = trip_count(eqn) if name == "while" else None
    return 1 if t is None else t


def _eqn_work(eqn):
    name = eqn.primitive.name
    if name in _MOVES:
        return 0
    if name == "gather":
        return _size(eqn.outvars[0])
    if name in _SCATTERS:
        return _size(eqn.invars[2]) if len(eqn.invars) > 2 else _size(eqn.outvars[0])
    if name == "dot_general":
        (lc, _), _ = eqn.params["dimension_numbers"]
        lhs = eqn.invars[0].aval.shape
        return 2 * _size(eqn.outvars[0]) * math.prod(lhs[i] for i in lc)
    if name == "conv_general_dilated":
        rhs = eqn.invars[1].aval.shape
        out_ch = rhs[eqn.params["dimension_numbers"].rhs_spec[0]]
        return 2 * _size(eqn.outvars[0]) * (math.prod(rhs) // max(1, out_ch))
    return max([_size(v) for v in list(eqn.invars) + list(eqn.outvars)] + [1])


def jaxpr_work(jaxpr, acc=None):
    """{"plain": work outside pallas_calls, "pallas": work in their kernels
    (a kernel's body times its grid steps), "calls": pallas_calls traced,
    "top": {primitive: plain work}} of a jaxpr (a loop's body counted once
    per scan step or per trip of a while loop that fixes its trips, else
    once; a cond's costliest branch)."""
    from jax.extend.core import jaxprs_in_params
    acc = acc if acc is not None else {"plain": 0, "pallas": 0, "calls": 0, "top": {}}
    for eqn in jaxpr.eqns:
        name = eqn.primitive.name
        if name == "pallas_call":
            inner = jaxpr_work(eqn.params["jaxpr"])
            grid = getattr(eqn.params.get("grid_mapping"), "grid", ()) or ()
            steps = math.prod(g if isinstance(g, int) else 1 for g in grid)
            acc["pallas"] += (inner["plain"] + inner["pallas"]) * steps
            acc["calls"] += 1 + inner["calls"]
            continue
        indexed = name == "gather" or name in _SCATTERS  # its update function is no loop body
        subs = [] if indexed else [jaxpr_work(j) for j in jaxprs_in_params(eqn.params)]
        if subs:
            if name == "cond":
                subs = [max(subs, key=lambda w: w["plain"] + w["pallas"])]
            mult = _trips(eqn)
            for w in subs:
                acc["plain"] += w["plain"] * mult
                acc["pallas"] += w["pallas"] * mult
                acc["calls"] += w["calls"]
                for k, v in w["top"].items():
                    if v * mult:
                        acc["top"][k] = acc["top"].get(k, 0) + v * mult
            continue
        w = _eqn_work(eqn)
        acc["plain"] += w
        if w:
            acc["top"][name] = acc["top"].get(name, 0) + w
    return acc


def traced_work(jax, fn, args):
    """jaxpr_work of fn traced at args' shapes (None when it cannot be)."""
    specs = [jax.ShapeDtypeStruct(x.shape, x.dtype) if hasattr(x, "shape") else x for x in args]
    try:
        w = jaxpr_work(jit_static(jax, fn, args).trace(*specs).jaxpr.jaxpr)
    except Exception:  # counting is best effort: a trace that fails is the compile's to report
        return None
    w["top"] = dict(sorted(w["top"].items(), key=lambda kv: -kv[1])[:3])
    return w


def case_work(tests_dir, cid, jax, fn, args):
    """The candidate's work split at case cid, with the reference's work
    frozen for that case ("reference"), for the engine's judgement."""
    w = traced_work(jax, fn, args)
    if w is not None and tests_dir and cid:
        try:
            w["reference"] = read_case(tests_dir, cid).get("reference_work")
        except (OSError, ValueError):  # no frozen case of that id (bench inputs made anew)
            pass
    return w
