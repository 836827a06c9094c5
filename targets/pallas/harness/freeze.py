"""Freezing a suite: the test scale chosen (scaling.py), every case's inputs
and expected outputs from the reference (with the reference evaluated in
float32 beside them where it computes in less), cases.json and the
manifest. The steps `freeze` and `verify`."""

import hashlib
import json
import os
import sys

from . import chunked, scaling
from .errors import HarnessError, error_text
from .tasks import _overrides, load_task
from .suite import MANIFEST, read_cases, sha256_file, verify_manifest, write_manifest
from .arrays import _EXOTIC, save_arrays
from .jaxcall import _clock, _jax, _leaves, _to_numpy, device_info, jit_static
from .inputs import _resolve_dtype, config_scope, configuration_task, entry_fn, make_inputs, reference_module
from .work import traced_work
from .protocol import HARNESS_VERSION
from .limits import PHASE


def _split_inputs(dyn):
    """Arrays go to the .npz; Python scalars to JSON."""
    import numpy as np
    kinds, arrays, scalars = [], [], []
    for x in dyn:
        if hasattr(x, "shape") and hasattr(x, "dtype"):
            kinds.append("array")
            arrays.append(np.asarray(x))
        elif isinstance(x, (bool, int, float, str)) or x is None:
            kinds.append("scalar")
            scalars.append(x)
        else:
            raise HarnessError("bad_task", "input of type %s cannot be frozen" % type(x).__name__)
    return kinds, arrays, scalars


TEST_SCALE_TARGET = 256  # the first scale tried brings the largest size to about this (scaling.py)
CASES_BUDGET_S = 120  # reference seconds the cases of an unscaled freeze may take; fewer cases beyond


def test_scale_target(jax, value):
    """--test-scale: 'auto' (scale on a CPU backend, where kernels are
    interpreted; not on a device), 'off' / 0, or the size the largest
    dimension is brought to first, as an integer."""
    v = str(value or "auto").lower()
    if v == "auto":
        return TEST_SCALE_TARGET if jax.default_backend() == "cpu" else None
    if v in ("off", "0", "none", "false"):
        return None
    try:
        n = int(v)
    except ValueError:
        raise HarnessError("bad_args", "--test-scale must be auto, off or a size, not %r" % value)
    return n if n > 0 else None


def choose_scale(jax, task, ref, dtype, a):
    """The Attempt whose sizes the cases use (scaling.py), and the record of
    the search for cases.json. --scale-factor F freezes at F, unsearched."""
    mem = int(os.environ.get("MK_PALLAS_MEM_MB") or 0) << 20
    def log(m):
        sys.stderr.write(m + "\n")
    if a.scale_factor:
        syms = scaling.symbols(task["reference"], task["inputs_fn"], task["config"], task["entry"])
        # a reference too large for this process is run in parts, checked on the test scale's suite (--base)
        split_why = chunked.base_check(jax, task, ref, a.base) if a.base else None
        chosen = scaling.try_factor(jax, task, ref, dtype, syms, a.scale_factor, mem // 3, scaling.FACTOR_FLOP_BUDGET,
                                    tier=a.scale_tier, split_why=split_why)
        if chosen.reason and (chosen.reason != "nothing to scale" or a.scale_tier):  # no widths: not a scale
            raise HarnessError("cannot_freeze", "%s at scale factor %d: %s" % (task["name"], a.scale_factor,
                                                                             chosen.reason))
        tried = [chosen]
    else:
        target = test_scale_target(jax, a.test_scale)
        chosen, tried = scaling.choose(jax, task, ref, dtype, target, mem // 3, log)
    record = {"factor": chosen.f, "target": None if a.scale_factor else test_scale_target(jax, a.test_scale),
              "tier": chosen.plan.get("tier"),
              "config": chosen.plan["config"], "inputs": chosen.plan["inputs"], "pinned": chosen.plan["pinned"],
              "flops": chosen.flops, "call_s": chosen.call_s, "tried": [t.record() for t in tried]}
    if chosen.parts:  # the reference run in equal parts (chunked.in_parts), as the baseline times it
        record["chunks"] = {str(p): m for p, m in sorted(chosen.parts.items())}
    return chosen, record


def choose_scales(jax, task, ref, dtype, a):
    """[(task, Attempt, record)]: the test scale of each input configuration
    of the task, each chosen by its own search (choose_scale, with the
    configuration's own inputs and tolerance: configuration_task); one for
    a task with one configuration. With --scale-factor every configuration
    is frozen at that factor, and one whose reference is refused there is
    left out of that suite (a warning says so) unless all are."""
    first = dict(task)
    chosen, record = choose_scale(jax, first, ref, dtype, a)
    n = count_configurations(jax, first, ref, dtype, chosen.inputs_fn)
    if n == 1:
        return [(task, chosen, record)], []
    out, dropped = [(configuration_task(task, 0), chosen, record)], []
    for k in range(1, n):
        kt = configuration_task(task, k)
        try:
            c, r = choose_scale(jax, kt, ref, dtype, a)
        except HarnessError as e:
            if not a.scale_factor or e.kind != "cannot_freeze":
                raise HarnessError(e.kind, "configuration %d of %d: %s" % (k, n, e.message))
            dropped.append("configuration %d (%s)" % (k, e.message))
            continue
        out.append((kt, c, r))
    warn = ["left out of this suite: %s" % "; ".join(dropped)] if dropped else []
    return out, warn


def count_configurations(jax, task, ref, dtype, inputs_fn):
    """How many input configurations the task's inputs function returns
    (MaxKernel's list of (dynamic, static) pairs; 1 for any other form):
    noted by make_inputs when the scale search made or traced the inputs,
    else traced here (made when it needs concrete values)."""
    if task["format"] != "maxkernel":
        return 1
    if not task.get("configurations"):
        def arrays():
            return [x for x in make_inputs(task, ref, 0, None, dtype, inputs_fn)[0] if hasattr(x, "shape")]
        try:
            jax.eval_shape(arrays)
        except HarnessError:
            raise
        except Exception:  # the inputs function needs concrete values
            arrays()
    return task.get("configurations") or 1


def merged_record(scales):
    """The test-scale record of a suite of several configurations: the one
    of the largest factor (larger scales halve it: escalate.lua), with every
    configuration's own under `configurations`."""
    if len(scales) == 1:
        return scales[0][2]
    top = dict(max((r for _, _, r in scales), key=lambda r: r["factor"]))
    top["configurations"] = [dict(r, configuration=t["configuration"]) for t, _, r in scales]
    return top


def freeze_plan(task, seeds, heldout, scale):
    """[(case id, seed, CONFIG overrides, held-out)]; when the reference is
    slow at the chosen sizes, only seed 0 and one held-out seed are kept.
    A configuration's cases are named after it: k1s0, k1h1001."""
    cfg = scale.plan["config"] or None
    pre = "k%d" % task["configuration"] if task.get("configuration") is not None else ""
    plan = [(pre + "s%d" % s, s, cfg, False) for s in seeds]
    for i, over in enumerate(task["test_configs"]):
        plan.append((pre + "c%d" % i, seeds[0], dict(cfg or {}, **over), False))
    plan += [(pre + "h%d" % s, s, cfg, True) for s in heldout]
    warn = []
    per_case = (scale.call_s or 0.0) * 2  # the inputs and the call
    if per_case * len(plan) > CASES_BUDGET_S and len(plan) > 2:
        keep = [c for c in plan if not c[3]][:1] + [c for c in plan if c[3]][:1]
        warn.append("the reference takes %.1f s a call at these sizes: %d of %d cases kept (%s)"
                    % (scale.call_s, len(keep), len(plan), ", ".join(c[0] for c in keep)))
        plan = keep
    return plan, warn


NARROW_FLOATS = ("bfloat16", "float16") + tuple(n for n in _EXOTIC if n.startswith("float8"))
WIDE_BUDGET_S = 60  # seconds a freeze may spend evaluating the reference in float32
WIDE_AGREE = 0.25  # ... whose outputs must be within this relative RMS of the reference's own


class WideRefused(ValueError):
    """A float32 evaluation of the reference that is not kept."""


def _narrow(x):
    return hasattr(x, "dtype") and str(x.dtype) in NARROW_FLOATS


def reference_in_float32(jax, fn, dyn, outs):
    """The reference's outputs with its bfloat16/float16 inputs widened to
    float32 (exactly: the same values), as numpy arrays, when its inputs or
    outputs are of such a type; else None. The bound of what a kernel
    computing in float32 may differ from the low-precision reference
    (compare_outputs `wide`). Raises when the reference refuses float32."""
    if not any(_narrow(x) for x in list(dyn) + list(outs)):
        return None
    import numpy as np
    wide = [x.astype("float32") if _narrow(x) else x for x in dyn]
    res = [_to_numpy(o) for o in _leaves(jit_static(jax, fn, wide)(*wide))]
    if [r.shape for r in res] != [o.shape for o in outs]:
        raise WideRefused("its float32 outputs have shapes %s, not %s"
                         % ([r.shape for r in res], [o.shape for o in outs]))
    res = [r.astype("float32") if r.dtype.kind == "f" else r for r in res]
    # Rounding moves a result a little; a reference that does something else
    # in float32 (a branch on its dtype) would excuse anything: not kept.
    for k, (r, o) in enumerate(zip(res, outs)):
        hi, lo = np.asarray(r, np.float64), np.asarray(o.astype("float32") if _narrow(o) else o, np.float64)
        fin = np.isfinite(hi) & np.isfinite(lo)
        if (np.isfinite(hi) != np.isfinite(lo)).any():
            raise WideRefused("output %d is finite in one precision and not the other" % k)
        size = float(np.sqrt(np.mean(np.square(hi[fin])))) if fin.any() else 0.0
        off = float(np.sqrt(np.mean(np.square(hi[fin] - lo[fin])))) if fin.any() else 0.0
        if off > WIDE_AGREE * size:
            raise WideRefused("output %d is %.3g RMS from its own (RMS %.3g): more than rounding" % (k, off, size))
    return res


VARY = 0.25  # a constant input c becomes c * (1 + VARY * N(0, 1)); zeros VARY * N(0, 1)


def vary_constants(jax, call, dyn, outs, tol, seed):
    """A held-out case's inputs with the floating inputs the task makes
    constant (a norm's weight of ones and bias of zeros, as a new layer's
    are) varied, each kept only where the reference's output then changes
    beyond the task's tolerance and stays finite: on constant inputs a
    kernel that ignores them (drops the weight and bias) is right, and
    seeds never change them. `call`: the reference, compiled. Returns the
    inputs, their outputs and the positions varied."""
    import numpy as np
    rng = np.random.default_rng(1000003 + int(seed))
    jnp, varied = jax.numpy, []
    for i, x in enumerate(dyn):
        if not (hasattr(x, "dtype") and jnp.issubdtype(x.dtype, jnp.floating) and x.size > 1):
            continue
        a = np.asarray(_to_numpy(x), dtype=np.float64)
        c = a.reshape(-1)[0]
        if not np.isfinite(c) or not (a == c).all():
            continue
        noise = rng.standard_normal(a.shape)
        new = list(dyn)
        new[i] = jnp.asarray(c * (1.0 + VARY * noise) if c else VARY * noise, dtype=x.dtype)
        got = [_to_numpy(o) for o in _leaves(call(*new))]
        finite = all(np.isfinite(np.asarray(g, np.float64)).all() or not np.isfinite(np.asarray(o, np.float64)).all()
                     for g, o in zip(got, outs))
        if finite and not scaling.passes_as(got, outs, tol):
            dyn, outs = new, got
            varied.append(i)
    return dyn, outs, varied


def freeze_case(jax, task, ref, dtype, tests, case, scale, skip_wide=None):
    """Inputs and expected outputs of one case, written under `tests`
    (with the reference evaluated in float32 beside them when its types
    are narrower, unless `skip_wide` says why not); returns its cases.json
    entry, a digest of its inputs, and {"s": seconds the float32
    evaluation took, "why": why none was frozen, or None}."""
    cid, seed, cfg, held = case
    no_wide, wide_s = None, 0.0
    with config_scope(ref, cfg):
        dyn, statics = make_inputs(task, ref, seed, None, dtype, scale.inputs_fn)
        try:
            json.dumps(statics)
        except TypeError:
            raise HarnessError("bad_task", "static args must be JSON values to be frozen: %r" % (statics,))
        fn = entry_fn(task, ref, statics)
        run = chunked.in_parts(jax, fn, scale.parts) if scale.parts else fn  # in parts: as the scale was chosen
        outs = [_to_numpy(o) for o in _leaves(jit_static(jax, run, dyn)(*dyn))]
        varied = []
        if held:  # the inputs the task makes constant, varied where the output depends on them
            dyn, outs, varied = vary_constants(jax, jit_static(jax, run, dyn), dyn, outs, task["tolerance"], seed)
        ref_work = traced_work(jax, fn, dyn)
        hi = None
        if skip_wide and any(_narrow(x) for x in list(dyn) + outs):
            no_wide = skip_wide
        elif not skip_wide:
            t0 = _clock()
            try:
                hi = reference_in_float32(jax, run, dyn, outs)
                wide_s = _clock() - t0
            except WideRefused as e:
                no_wide = "its float32 evaluation is not kept (%s)" % e
            except Exception as e:  # the reference's own code: any error means "not available"
                no_wide = "the reference fails in float32 (%s)" % error_text(e, limit=200)
    h = hashlib.sha256()
    for x in dyn:
        h.update(_to_numpy(x).tobytes() if hasattr(x, "shape") else repr(x).encode())
    kinds, arrays, scalars = _split_inputs(dyn)
    imeta = save_arrays(os.path.join(tests, "inputs", cid + ".npz"), arrays)
    with open(os.path.join(tests, "inputs", cid + ".json"), "w") as f:
        json.dump({"id": cid, "seed": seed, "config": cfg, "kinds": kinds, "inputs": imeta,
                   "scalars": scalars, "statics": statics, "scale_factor": scale.f, "varied": varied,
                   "reference_work": ref_work and ref_work["plain"] + ref_work["pallas"]}, f)
    ometa = save_arrays(os.path.join(tests, "expected", cid + ".npz"), outs)
    emeta = {"id": cid, "outputs": ometa}
    if hi is not None:
        emeta["float32"] = save_arrays(os.path.join(tests, "expected", cid + ".f32.npz"), hi)
    with open(os.path.join(tests, "expected", cid + ".json"), "w") as f:
        json.dump(emeta, f)
    entry = {"id": cid, "seed": seed, "config": cfg, "heldout": held, "float32": hi is not None,
             "shapes": [m["shape"] for m in imeta], "output_shapes": [m["shape"] for m in ometa]}
    if varied:
        entry["varied"] = varied
    if task.get("configuration") is not None:  # checked with its configuration's own tolerance
        entry["configuration"], entry["tolerance"] = task["configuration"], task["tolerance"]
    return entry, (h.hexdigest(), json.dumps(cfg, sort_keys=True)), {"s": wide_s, "why": no_wide}


def cmd_freeze(a):
    task = load_task(a.task, _overrides(a))
    jax = _jax()
    ref = reference_module(task)
    dtype = _resolve_dtype(a.dtype)
    for sub in ("inputs", "expected"):
        os.makedirs(os.path.join(a.tests, sub), exist_ok=True)
    scales, warnings = choose_scales(jax, task, ref, dtype, a)
    plan = []  # [(case, its configuration's task, scale)]
    for ktask, scale, _ in scales:
        p, w = freeze_plan(ktask, _int_list(a.seeds) or [0], _int_list(a.heldout), scale)
        plan += [(c, ktask, scale) for c in p]
        warnings += w + ([scale.warning] if scale.warning else [])
    cases = freeze_cases(jax, ref, dtype, a.tests, plan, warnings)
    record = merged_record(scales)
    info = {"task": task["name"], "format": task["format"], "cases": cases, "tolerance": task["tolerance"],
            "dtype": a.dtype, "device": device_info(jax), "test_scale": record, "scaled_config": record["config"],
            "warnings": warnings, "harness_version": HARNESS_VERSION}
    if len(scales) > 1:  # input configurations (MaxKernel's list form), each case of one
        info["configurations"] = len(scales)
    with open(os.path.join(a.tests, "cases.json"), "w") as f:
        json.dump(info, f, indent=1)
    n = write_manifest(a.tests)
    return {"status": "ok", "cases": cases, "files": n, "warnings": warnings, "test_scale": record,
            "scaled_config": record["config"], "manifest_sha": sha256_file(os.path.join(a.tests, MANIFEST))}


def freeze_cases(jax, ref, dtype, tests, plan, warnings):
    """Freeze every case of `plan` ([(case, task, scale)]) into `tests`,
    held-out cases first (the final verdict is theirs); their cases.json
    entries in the plan's order. Adds to `warnings`."""
    cases, digests, wide_s, no_wide = [], {}, 0.0, []
    for case, task, scale in sorted(plan, key=lambda c: not c[0][3]):
        PHASE["now"] = "freezing case %s (scale factor %d)" % (case[0], scale.f)
        # The float32 evaluation costs about what the case does: it is made
        # while the freeze's share of time for it lasts.
        skip = None if wide_s < WIDE_BUDGET_S else "over the freeze's %d s for it" % WIDE_BUDGET_S
        entry, key, w = freeze_case(jax, task, ref, dtype, tests, case, scale, skip)
        wide_s += w["s"]
        if w["why"]:
            no_wide.append("%s: %s" % (entry["id"], w["why"]))
        # Seeds that do not change the inputs (create_inputs imported its key
        # function directly, say) are reported: they add no coverage.
        if key in digests:
            warnings.append("case %s has the same inputs as case %s: the seed does not reach create_inputs"
                            % (entry["id"], digests[key]))
        digests.setdefault(key, entry["id"])
        cases.append(entry)
    order = [c[0][0] for c in plan]
    cases.sort(key=lambda e: order.index(e["id"]))
    if no_wide:
        warnings.append("no float32 evaluation of the reference for case %s (kernels are judged against "
                        "its own precision alone there)" % "; case ".join(no_wide))
    return cases


def cmd_verify(a):
    """Check the manifest (no JAX): the idempotent half of freeze."""
    files = verify_manifest(a.tests)
    info = read_cases(a.tests)
    return {"status": "ok", "cases": info.get("cases", []), "files": len(files), "test_scale": info.get("test_scale"),
            "warnings": info.get("warnings", []), "manifest_sha": sha256_file(os.path.join(a.tests, MANIFEST))}


def _int_list(s):
    if not s:
        return []
    return [int(x) for x in str(s).replace(" ", "").split(",") if x != ""]
