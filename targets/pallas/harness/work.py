"""Work inside and outside the Pallas kernels: a kernel whose plain-JAX part
does the reference's work (the reference called in disguise, a matmul in
jnp with a Pallas epilogue, a fallback "off TPU") is no Pallas kernel.
Counted on the traced jaxpr, in the same units for the reference (at
freeze) and the candidate: a contraction 2 x output x contracted size, a
convolution 2 x output x its kernel's size per output channel, any other
computation the size of its largest operand; moving data counts nothing."""

import math

from .suite import read_case
from .jaxcall import jit_static


_MOVES = frozenset((
    "reshape", "transpose", "broadcast_in_dim", "squeeze", "expand_dims", "slice", "dynamic_slice",
    "dynamic_update_slice", "concatenate", "pad", "convert_element_type", "copy", "copy_p", "iota", "gather",
    "rev", "device_put", "bitcast_convert_type", "stop_gradient", "get", "swap", "load", "store", "masked_load",
    "masked_swap", "dma_start", "dma_wait", "semaphore_signal", "semaphore_wait", "semaphore_read", "program_id",
    "num_programs", "run_scoped", "delay", "optimization_barrier"))


def _size(v):
    return math.prod(getattr(getattr(v, "aval", None), "shape", ()) or ())


def _eqn_work(eqn):
    name = eqn.primitive.name
    if name in _MOVES:
        return 0
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
    per scan step, once for a while loop; a cond's costliest branch)."""
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
        subs = [jaxpr_work(j) for j in jaxprs_in_params(eqn.params)]
        if subs:
            if name == "cond":
                subs = [max(subs, key=lambda w: w["plain"] + w["pallas"])]
            mult = eqn.params.get("length", 1) if name == "scan" else 1
            for w in subs:
                acc["plain"] += w["plain"] * mult
                acc["pallas"] += w["pallas"] * mult
                acc["calls"] += w["calls"]
                for k, v in w["top"].items():
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
