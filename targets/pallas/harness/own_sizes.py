"""The check at the task's own sizes on a CPU: its suite (`freeze
--own-sampled`: the reference run natively by XLA at the task's own sizes
on one seed, its expected outputs kept and its inputs not: they are made
again from the seed, their digest checked), the candidate's sampled run
(`sample`: sampling.py; candidate code, no expected output read) and its
check (`sample_check`: numpy only, the compared blocks against the
expected outputs)."""

import hashlib
import json
import math
import os

from .errors import HarnessError, error_text
from .tasks import _overrides, load_task
from .suite import MANIFEST, case_ids, read_case, read_cases, sha256_file, verify_manifest, write_manifest
from .arrays import load_arrays, save_arrays, write_json
from .compare import compare_outputs
from .jaxcall import _jax, _leaves, _to_numpy, device_info, jit_static
from .inputs import _resolve_dtype, entry_fn, make_inputs, reference_module
from .interpret import interpret_mode, tpu_interpret_params
from .races import call_checked
from .steps import candidate_module
from .protocol import HARNESS_VERSION
from .limits import PHASE
from . import chunked, sampling

OWN_FLOP_BUDGET = 1e13  # FLOP of one reference call at the task's own sizes (its time is the freeze's limit)
OWN_OUTPUT_BYTES = 1 << 30  # expected outputs kept at the task's own sizes


def _digest(dyn):
    """SHA-256 of the inputs' bytes (read in place: no copy of a large input)."""
    import numpy as np
    h = hashlib.sha256()
    for x in dyn:
        if hasattr(x, "shape"):
            h.update(np.ascontiguousarray(_to_numpy(x)).reshape(-1).view(np.uint8))
        else:
            h.update(repr(x).encode())
    return h.hexdigest()


def _own_inputs(task, ref, seed, dtype):
    """The inputs of the task's own sizes from `seed` (the task's own
    CONFIG, its own inputs function) drawn with JAX's "rbg" generator:
    its threefry default held 3 GB of XLA temporaries to draw 8p's 470 MB
    bfloat16 normal (past the 4 GB a harness process may use), rbg 0.2 GB.
    The same distributions from another stream; the freeze and the sampled
    run draw them alike, and the digest checks it."""
    if task["format"] == "maxkernel":
        task = dict(task, configuration=0)
    jax = _jax()
    keep = jax.config.jax_default_prng_impl
    jax.config.update("jax_default_prng_impl", "rbg")
    try:
        dyn, statics = make_inputs(task, ref, seed, None, dtype)
        for x in dyn:  # drawn before the generator is restored
            if hasattr(x, "block_until_ready"):
                x.block_until_ready()
        return dyn, statics
    finally:
        jax.config.update("jax_default_prng_impl", keep)


def _refuse(why):
    raise HarnessError("cannot_freeze", "at the task's own sizes: " + why)


def _chunk_plan(a, task, ref, jax, fn, dyn, out_shapes, need, mem):
    """The plan ({axis: parts}) of a reference too large for this process
    computed in chunks (chunked.py), checked on the test scale's first case
    (`--base`), and the reference compiled for one part; refuses when there
    is none within the memory bound."""
    over = "XLA's reference needs %.3g MB (%.3g MB in this process, by chunked.estimate), over %.3g MB" % (
        need / 1e6, chunked.estimate(need) / 1e6, chunked.bound(mem) / 1e6)
    in_shapes = [x.shape for x in dyn if hasattr(x, "shape")]
    # the outputs are written to files part by part (chunked.run): not resident while a part runs
    budget = (chunked.bound(mem) - chunked.resident_bytes(dyn) - chunked.OVERHEAD_BYTES) / chunked.XLA_UNDERCOUNT
    sizes = chunked.axis_sizes(in_shapes, [s.shape for s in out_shapes])
    if not a.base:
        _refuse(over + " (a split of it is not checked without the test scale's suite)")
    PHASE["now"] = "checking the reference split in parts on the test scale's case"

    def part_bytes(parts):  # the compiled part, and what XLA counts for it
        part = chunked.compiled_chunk(jax, fn, dyn, parts)
        return chunked.xla_bytes(part), part
    return chunked.plan(sizes, need, budget, chunked.base_check(jax, task, ref, a.base), part_bytes,
                        lambda why: _refuse(over + "; " + why))


def freeze_own(a):
    """freeze --own-sampled: one case (the first held-out seed) at the
    task's own sizes: inputs made and digested, never stored; the expected
    outputs of the reference compiled natively, bounded by OWN_OUTPUT_BYTES
    and OWN_FLOP_BUDGET (and the memory limit, through its inputs)."""
    task = load_task(a.task, _overrides(a))
    jax = _jax()
    ref = reference_module(task)
    dtype = _resolve_dtype(a.dtype)
    seed = ([int(x) for x in str(a.heldout or "").split(",") if x.strip()] or [1001])[0]
    cid = "o%d" % seed
    for sub in ("inputs", "expected"):
        os.makedirs(os.path.join(a.tests, sub), exist_ok=True)
    PHASE["now"] = "making the inputs at the task's own sizes"
    dyn, statics = _own_inputs(task, ref, seed, dtype)
    if (task.get("configurations") or 1) > 1:
        _refuse("a task of %d input configurations" % task["configurations"])
    fn = jit_static(jax, entry_fn(task, ref, statics), dyn)
    lowered = fn.lower(*dyn)
    shapes = _leaves(jax.eval_shape(fn, *dyn))
    out_bytes = sum(int(s.size) * s.dtype.itemsize for s in shapes)
    if out_bytes > OWN_OUTPUT_BYTES:
        _refuse("outputs of %.3g MB, over the %.3g MB kept" % (out_bytes / 1e6, OWN_OUTPUT_BYTES / 1e6))
    from .scaling import _flops
    flops = _flops(lowered)
    if flops and flops > OWN_FLOP_BUDGET:
        _refuse("%.3g FLOP a call, over the budget of %.3g" % (flops, OWN_FLOP_BUDGET))
    compiled = lowered.compile()
    need = chunked.xla_bytes(compiled)
    mem = int(os.environ.get("MK_PALLAS_MEM_MB") or 0) << 20
    parts, spilled, warnings = None, None, []
    if need and chunked.estimate(need) > chunked.bound(mem):  # 1p's attention scores alone are 17 GB there
        del compiled
        digest = _digest(dyn)
        spilled = os.path.join(a.tests, ".spilled")  # the inputs and outputs read and written part by part
        dyn = chunked.spill(chunked.as_numpy(dyn), spilled)  # read part by part from here
        try:
            parts, part = _chunk_plan(a, task, ref, jax, fn, dyn, shapes, need, mem)
        except HarnessError as e:
            if e.kind != "cannot_freeze" or not chunked.fits_whole(need, mem):
                raise
            # no split checks out (8p's GEMM: no axis every array has), but XLA's own count fits the limit
            warnings.append("the reference ran whole: %s" % e.message)
            dyn = [x[...] if isinstance(x, chunked.Spilled) else x for x in dyn]
            compiled = lowered.compile()
    PHASE["now"] = "running the reference at the task's own sizes"
    import time
    t0 = time.monotonic()
    if parts:
        PHASE["now"] = "running the reference at the task's own sizes in %d chunks" % math.prod(parts.values())
        outs = chunked.run(jax, fn, dyn, parts, shapes, part, spilled)
    else:
        outs = [_to_numpy(o) for o in _leaves(compiled(*dyn))]
    call_s = time.monotonic() - t0
    if spilled:
        import shutil
        shutil.rmtree(spilled, ignore_errors=True)
    else:
        digest = _digest(dyn)
    kinds = ["array" if hasattr(x, "shape") else "scalar" for x in dyn]
    imeta = [{"shape": list(x.shape), "dtype": str(x.dtype)} for x in dyn if hasattr(x, "shape")]
    del dyn
    write_json(os.path.join(a.tests, "inputs", cid + ".json"),
               {"id": cid, "seed": seed, "config": None, "kinds": kinds, "inputs": imeta, "statics": statics,
                "scale_factor": 1, "regenerate": True, "digest": digest})
    ometa = save_arrays(os.path.join(a.tests, "expected", cid + ".npz"), outs)
    write_json(os.path.join(a.tests, "expected", cid + ".json"), {"id": cid, "outputs": ometa})
    case = {"id": cid, "seed": seed, "config": None, "heldout": True, "float32": False,
            "shapes": [m["shape"] for m in imeta], "output_shapes": [m["shape"] for m in ometa]}
    record = {"factor": 1, "own_sampled": True, "flops": flops, "call_s": call_s}
    if parts:
        record["chunks"] = {str(p): m for p, m in sorted(parts.items())}
    info = {"task": task["name"], "format": task["format"], "cases": [case], "tolerance": task["tolerance"],
            "dtype": a.dtype, "device": device_info(jax), "test_scale": record, "own_sampled": True,
            "warnings": warnings, "harness_version": HARNESS_VERSION}
    with open(os.path.join(a.tests, "cases.json"), "w") as f:
        json.dump(info, f, indent=1)
    n = write_manifest(a.tests)
    return {"status": "ok", "cases": [case], "files": n, "warnings": warnings, "test_scale": record,
            "manifest_sha": sha256_file(os.path.join(a.tests, MANIFEST))}


def _not_sampled(why, **kw):
    """No verdict at the task's own sizes: the engine keeps the one it had."""
    return dict({"status": "not_sampled", "reason": why,
                 "message": "not checked at the task's own sizes: %s" % why}, **kw)


def cmd_sample(a):
    """Run the candidate at the task's own sizes (its suite frozen by
    --own-sampled) with its pallas_call sampled; write the compared blocks
    and the plan to --outputs. Never reads an expected output."""
    task = load_task(a.task, _overrides(a))
    jax = _jax()
    verify_manifest(a.tests, subset={"inputs"})
    cid = case_ids(a.tests, heldout=True)[0]
    meta = read_case(a.tests, cid)
    os.makedirs(a.outputs, exist_ok=True)
    mode = interpret_mode(jax, a.interpret)
    if mode != "tpu":
        return _not_sampled("sampled runs are for TPU interpret mode (this step runs in %s mode)" % mode)
    mod, failed = candidate_module(a, mode)
    if failed:
        return failed
    PHASE["now"] = "making the inputs at the task's own sizes"
    dyn, statics = _own_inputs(task, reference_module(task), meta["seed"], _resolve_dtype(a.dtype))
    if _digest(dyn) != meta.get("digest"):
        return _not_sampled("its inputs, made again from seed %s, differ from the ones the reference ran on"
                            % meta["seed"])
    fn = entry_fn(task, mod, statics)
    if fn is None:
        return {"status": "compile_error", "phase": "import", "kind": "import",
                "message": "kernel.py does not define %s()" % task["entry"]}
    return _sampled_call(jax, a, fn, dyn, cid)


def cmd_sample_plan(a):
    """Whether the candidate can be run sampled at the task's own sizes,
    from their shapes alone (nothing made, nothing run): asked before the
    task's own sizes are frozen, which costs minutes. "not_sampled" with
    why, or "ok" with the plan in words (or none when the inputs must be
    made to be known: the sampled run then finds out)."""
    from .scaling import _abstract_inputs
    task = load_task(a.task, _overrides(a))
    jax = _jax()
    mode = interpret_mode(jax, a.interpret)
    if mode != "tpu":
        return _not_sampled("sampled runs are for TPU interpret mode (this step runs in %s mode)" % mode)
    if (task.get("configurations") or 1) > 1:
        return _not_sampled("a task of %d input configurations" % task["configurations"])
    mod, failed = candidate_module(a, mode)
    if failed:
        return failed
    if task["format"] == "maxkernel":
        task = dict(task, configuration=0)
    PHASE["now"] = "tracing the candidate at the task's own sizes"
    shapes = _abstract_inputs(jax, task, reference_module(task), _resolve_dtype(a.dtype), None)
    if shapes is None:
        return {"status": "ok", "plan": None}
    specs, statics = shapes
    fn = entry_fn(task, mod, statics)
    if fn is None:
        return {"status": "compile_error", "phase": "import", "kind": "import",
                "message": "kernel.py does not define %s()" % task["entry"]}
    try:
        _, st, why = _sampled_trace(jax, fn, specs, a.sample_seed, tpu_interpret_params())
    except BaseException as e:  # its verdicts at the scales it runs at say what is wrong
        return _not_sampled("it does not compile there (%s)" % error_text(e, a.candidate).splitlines()[-1][:300])
    if why:
        return _not_sampled(why)
    return {"status": "ok", "plan": st.calls[0][0].describe()}


def _sampled_trace(jax, fn, specs, seed, params):
    """(traced, its sampling state, why it cannot be sampled or None): the
    candidate traced at `specs` with its pallas_call planned (sampling.py)."""
    from jax.experimental.pallas import tpu as pltpu
    with sampling.trace(seed) as st, pltpu.force_tpu_interpret_mode(params):
        traced = jit_static(jax, sampling.wrap_outputs(fn, st), specs).trace(*specs)
        return traced, st, sampling.refusal(st, traced.jaxpr.jaxpr)


def _sampled_call(jax, a, fn, dyn, cid):
    from jax.experimental.pallas import tpu as pltpu
    import time
    specs = [jax.ShapeDtypeStruct(x.shape, x.dtype) if hasattr(x, "shape") else x for x in dyn]
    PHASE["now"] = "compiling the candidate's sampled run at the task's own sizes"
    t0 = time.monotonic()
    params = tpu_interpret_params()
    try:
        traced, st, why = _sampled_trace(jax, fn, specs, a.sample_seed, params)
        if why:
            return _not_sampled(why)
        if st.calls[0][0].unwritten:  # its outputs are the kernel's: entries no grid point writes
            return {"status": "incorrect", "correct": False, "reason": "unwritten", "case": cid,
                    "message": "at the task's own sizes, case %s: %s (an output left unwritten there: the "
                               "grid does not cover the task's own shapes)" % (cid, st.calls[0][0].unwritten[0])}
        plan = st.calls[0][0]  # no poison fill: in TPU interpret mode unwritten buffers are NaN already
        arrays = [s for s in specs if hasattr(s, "shape")]
        split = sampling.split_at_call(traced.jaxpr) if len(traced.jaxpr.jaxpr.invars) == len(arrays) else None
        if split:  # the call's operands first, then the call alone: the inputs are freed in between
            before = jax.jit(split[0]).lower(*arrays).compile()
            with pltpu.force_tpu_interpret_mode(params):
                compiled = jax.jit(split[1]).lower(*[jax.ShapeDtypeStruct(v.shape, v.dtype)
                                                     for v in split[2]]).compile()
        else:  # traced again returning the compared blocks alone (the same sample: the same seed and shapes)
            with sampling.trace(a.sample_seed) as again, pltpu.force_tpu_interpret_mode(params):
                compiled = jit_static(jax, sampling.gathered(fn, plan), dyn).trace(*specs).lower().compile()
            if len(again.calls) != 1 or again.calls[0][0].points != plan.points:
                return _not_sampled("its second trace sampled other grid points than its first")
    except BaseException as e:  # the kernel's own sizes: its errors are the scale's verdicts' business
        return _not_sampled("it does not compile there (%s)" % error_text(e, a.candidate).splitlines()[-1][:300])
    compile_s = time.monotonic() - t0
    PHASE["now"] = "running the candidate's sampled run at the task's own sizes"
    t0 = time.monotonic()
    try:
        args = list(dyn)
        dyn.clear()  # the inputs are the call's alone from here: freed with it (the task's own sizes are large)
        if split:
            ops = list(before(*[x for x in args if hasattr(x, "shape")]))
            del args
            out, verdict = call_checked(compiled, ops, "tpu", a.candidate)
            del ops
        else:
            out, verdict = call_checked(compiled, args, "tpu", a.candidate)
            del args
    except BaseException as e:  # whatever the candidate raises is its crash
        return {"status": "crash", "phase": "run", "case": cid, "plan": plan.record(),
                "message": "at the task's own sizes (%s): %s" % (plan.describe(), error_text(e, a.candidate))}
    calls_s = time.monotonic() - t0
    if verdict:
        verdict.update(case=cid, phase="run", plan=plan.record(),
                       message="at the task's own sizes (%s): %s" % (plan.describe(), verdict["message"]))
        return verdict
    # the compared blocks alone
    vals = sampling.call_blocks(_leaves(out), plan) if split else [_to_numpy(v) for v in _leaves(out)]
    del out
    ometa = save_arrays(os.path.join(a.outputs, cid + ".sampled.npz"), vals)
    write_json(os.path.join(a.outputs, cid + ".sampled.json"), {"outputs": ometa, "plan": plan.record()})
    return {"status": "ok", "case": cid, "plan": plan.record(), "checked_at": "the task's own sizes (%s)"
            % plan.describe(), "compile_s": compile_s, "calls_s": calls_s, "interpret": "tpu"}


def cmd_sample_wide(a):
    """The reference evaluated in float32 on the blocks a sampled run
    wrote (`<case>.wide.npz` beside them, one array per block), part by
    part of its split: the bound of how far a kernel computing in float32
    may be from a bfloat16 reference, as the test scale's cases have it
    (compare_outputs `wide`). Run by the engine when the blocks fail
    against the reference's own outputs; reference code only."""
    from .freeze import _narrow
    task = load_task(a.task, _overrides(a))
    jax = _jax()
    ref = reference_module(task)
    verify_manifest(a.tests, subset={"inputs"})
    cid = case_ids(a.tests, heldout=True)[0]
    meta = read_case(a.tests, cid)
    chunks = (read_cases(a.tests).get("test_scale") or {}).get("chunks") or {}
    with open(os.path.join(a.outputs, cid + ".sampled.json")) as f:
        blocks = json.load(f)["plan"]["blocks"]
    PHASE["now"] = "making the inputs at the task's own sizes"
    dyn, statics = _own_inputs(task, ref, meta["seed"], _resolve_dtype(a.dtype))
    if _digest(dyn) != meta.get("digest"):
        return {"status": "ok", "wide": False, "why": "the inputs made again differ from the frozen ones"}
    fn = entry_fn(task, ref, statics)
    shapes = _leaves(jax.eval_shape(jit_static(jax, fn, dyn), *dyn))
    spilled = os.path.join(a.outputs, ".inputs-spilled")
    dyn = chunked.spill(chunked.as_numpy(dyn), spilled)
    if not any(_narrow(x) for x in list(dyn) + list(shapes)):
        return {"status": "ok", "wide": False, "why": "the reference is not of a narrow type"}
    mem = int(os.environ.get("MK_PALLAS_MEM_MB") or 0) << 20
    budget = chunked.bound(mem) - chunked.resident_bytes(dyn) - chunked.OVERHEAD_BYTES
    PHASE["now"] = "evaluating the reference in float32 on the sampled blocks"
    try:
        wide, why = chunked.blocks_wide(jax, fn, dyn, {int(p): m for p, m in chunks.items()}, shapes, blocks, budget,
                                        mem)
    except Exception as e:  # the reference refuses float32: no bound from it
        wide, why = None, "the reference fails in float32 (%s)" % error_text(e, limit=200)
    import shutil
    shutil.rmtree(spilled, ignore_errors=True)
    if wide is None:
        return {"status": "ok", "wide": False, "why": why}
    ometa = save_arrays(os.path.join(a.outputs, cid + ".wide.npz"), wide)
    write_json(os.path.join(a.outputs, cid + ".wide.json"), {"outputs": ometa})
    return {"status": "ok", "wide": True, "blocks": len(wide)}


def cmd_sample_check(a):
    """Compare the blocks a sampled run wrote with the same blocks of the
    expected outputs (numpy only); the first wrong block is the verdict."""
    task = load_task(a.task, _overrides(a))
    verify_manifest(a.tests, subset={"expected", "inputs"})
    cid = case_ids(a.tests, heldout=True)[0]
    with open(os.path.join(a.tests, "expected", cid + ".json")) as f:
        want = load_arrays(os.path.join(a.tests, "expected", cid + ".npz"), json.load(f)["outputs"], True)
    with open(os.path.join(a.outputs, cid + ".sampled.json")) as f:
        got_meta = json.load(f)
    got = load_arrays(os.path.join(a.outputs, cid + ".sampled.npz"), got_meta["outputs"], True)
    plan = got_meta["plan"]
    blocks = plan["blocks"]
    if len(got) != len(blocks) or not blocks:
        return {"status": "error", "error": {"kind": "harness", "message": "sampled outputs do not match their plan"}}
    tol = task["tolerance"]
    worst = 0.0
    wide = _wide_blocks(a.outputs, cid, want, blocks)
    for i, (g, b) in enumerate(zip(got, blocks)):
        o = int(b["output"])
        if o >= len(want):
            return {"status": "incorrect", "correct": False, "reason": "count",
                    "message": "the kernel has more outputs than the reference's %d" % len(want)}
        w = want[o][tuple(slice(s, e) for s, e in zip(b["start"], b["stop"]))]
        c = compare_outputs([g], [w], tol["atol"], tol["rtol"], wide=[wide[i]] if wide else None)
        worst = max(worst, c["max_abs_err"])
        if not c["ok"]:
            where = ", ".join("%d:%d" % (s, e) for s, e in zip(b["start"], b["stop"]))
            return {"status": "incorrect", "correct": False, "reason": c["reason"], "block": b,
                    "max_abs_err": c["max_abs_err"],
                    "message": "at the task's own sizes (%s), case %s: output %d block %s (elements [%s]): %s"
                               % (plan["text"], cid, o, tuple(b["index"]), where,
                                  c["message"].replace("output: ", "", 1))}
    return {"status": "ok", "correct": True, "case": cid, "blocks": len(blocks), "max_abs_err": worst,
            "message": "", "checked_at": "the task's own sizes (%s)" % plan["text"], "wide": bool(wide)}


def _wide_blocks(outputs, cid, want, blocks):
    """The float32 evaluation of the reference on the blocks (sample_wide),
    when it was made and agrees with the reference's own outputs there as
    rounding does (freeze.WIDE_AGREE of their RMS); else None."""
    import numpy as np
    from .freeze import WIDE_AGREE
    path = os.path.join(outputs, cid + ".wide.json")
    if not os.path.exists(path):
        return None
    with open(path) as f:
        hi = load_arrays(os.path.join(outputs, cid + ".wide.npz"), json.load(f)["outputs"], True)
    if len(hi) != len(blocks):
        return None
    for h, b in zip(hi, blocks):
        w = np.asarray(want[int(b["output"])][tuple(slice(s, e) for s, e in zip(b["start"], b["stop"]))], np.float64)
        h = np.asarray(h, np.float64)
        fin = np.isfinite(h) & np.isfinite(w)
        if h.shape != w.shape or (np.isfinite(h) != np.isfinite(w)).any():
            return None
        if fin.any() and np.sqrt(np.mean(np.square(h[fin] - w[fin]))) > WIDE_AGREE * np.sqrt(np.mean(np.square(h[fin]))):
            return None
    return hi
