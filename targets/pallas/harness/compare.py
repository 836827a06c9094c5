"""Output comparison, numpy only: a candidate's outputs against the
frozen expected ones, within the task's tolerance (or as near the reference
evaluated in float32 as the reference itself is). `check` runs it in a
process that never imports JAX nor candidate code."""

import json
import os

from .suite import case_shapes, read_cases, verify_manifest
from .arrays import load_arrays


def _within_as_published(diff, w, both, nonfin_mismatch, atol, rtol, rms):
    """Whether an output passes the task's tolerance as published (every
    value within atol + rtol * |want|, atol unscaled) with a relative RMS
    error of at most rtol (so zeros or a mis-scaled output of small values
    still fail). A bfloat16 reference's own rounding can exceed the
    RMS-scaled atol: 1p's causal attention at 4096 keys has outputs of RMS
    0.07, where the XLA reference in bfloat16 is 3.6e-4 RMS from float32
    and a float32 flash kernel 1.4e-4."""
    import numpy as np
    if nonfin_mismatch.any() or ((diff > atol + rtol * np.abs(w)) & both).any():
        return False
    return float(np.sqrt(np.mean(np.square(diff[both])))) <= rtol * rms if both.any() else False


def _rms(x):
    import numpy as np
    return float(np.sqrt(np.mean(np.square(x))))


def _within_reference_error(g, w, hi, both, atol, rtol):
    """Whether an output is as close to the reference evaluated in float32
    (`hi`, frozen beside a reference that computes in bfloat16 or float16)
    as the reference itself is, within the task's tolerance: every value
    within atol + rtol * |hi| + 2 * max|want - hi|, and an RMS error from
    `hi` of at most rtol * rms(hi) + 2 * rms(want - hi) (twice the
    reference's own error, as flash-attention kernels are commonly tested).
    A kernel that computes in float32 can be further from the low-precision
    reference than the tolerance while nearer the true value: 1p's causal
    attention at held-out seed 1001 has a value where the bf16 reference is
    0.0198 from float32 and a float32 flash kernel 0.0065, 0.0195 apart
    (atol 1e-2). Returns (ok, max |got - hi|)."""
    import numpy as np
    hi = np.atleast_1d(np.asarray(hi, dtype=np.float64))
    if hi.shape != w.shape:
        return False, None
    ok = both & np.isfinite(hi)
    if not ok.any() or (both & ~ok).any():
        return False, None
    own = np.abs(w - hi)[ok]
    err = np.abs(g - hi)[ok]
    if (err > atol + rtol * np.abs(hi[ok]) + 2.0 * float(own.max())).any():
        return False, float(err.max())
    return _rms(err) <= rtol * _rms(hi[ok]) + 2.0 * _rms(own), float(err.max())


OWN_FLOOR = 2.0 ** -16  # the least error credited to a reference (relative RMS): float32 rounding over a long sum
FAR_BEYOND = 10.0  # an error this many times the reference's own is worth a warning, even within the tolerance


def error_ratio(g, w, hi):
    """How many times the reference's own error (its output `w` against
    its float32 evaluation `hi`, RMS over finite values, at least
    OWN_FLOOR of rms(hi)) a kernel's output `g` is from `hi`; None without
    finite values to compare."""
    import numpy as np
    hi = np.atleast_1d(np.asarray(hi, dtype=np.float64))
    if hi.shape != w.shape:
        return None
    ok = np.isfinite(g) & np.isfinite(w) & np.isfinite(hi)
    if not ok.any():
        return None
    own = max(_rms((w - hi)[ok]), OWN_FLOOR * _rms(hi[ok]))
    return _rms((g - hi)[ok]) / own if own > 0 else None


def compare_outputs(got, want, atol, rtol, max_report=5, wide=None):
    """Compare lists of numpy arrays. Returns {"ok", "reason", "message",
    "max_abs_err", "max_rel_err", "mismatches"}. An element passes when
    |got - want| <= atol * min(1, rms(want)) + rtol * |want|; an output
    whose elements fail that passes when _within_as_published, or, when
    `wide` (the reference evaluated in float32, one array per output) is
    given, when _within_reference_error. Reasons: count, shape, nonfinite
    (NaN/Inf where the expected is finite), zeros (an all-zero output that
    fails: passing a loose atol with zeros is a known cheat), mismatch."""
    import numpy as np
    res = {"ok": True, "reason": None, "message": "", "max_abs_err": 0.0, "max_rel_err": 0.0, "mismatches": 0}

    def fail(reason, msg):
        res.update(ok=False, reason=reason, message=msg)
        return res

    if len(got) != len(want):
        return fail("count", "expected %d output array(s), got %d" % (len(want), len(got)))
    for k, (g, w) in enumerate(zip(got, want)):
        g = np.asarray(g, dtype=np.float64)
        w = np.asarray(w, dtype=np.float64)
        label = "output %d" % k if len(want) > 1 else "output"
        if g.shape != w.shape:
            return fail("shape", "%s has shape %s, expected %s" % (label, tuple(g.shape), tuple(w.shape)))
        g, w = np.atleast_1d(g), np.atleast_1d(w)  # a 0-d output (a scalar loss) as one value
        if g.size == 0:
            continue
        wfin = np.isfinite(w)
        bad = ~np.isfinite(g) & wfin
        if bad.any():
            idx = np.argwhere(bad)[0].tolist()
            return fail("nonfinite", "%s has %d NaN/Inf value(s) where the reference is finite "
                        "(first at index %s: %r): an unwritten or poisoned output, or a read of uninitialised "
                        "memory (TPU interpret mode fills VMEM scratch with NaN)?"
                        % (label, int(bad.sum()), idx, float(g[tuple(idx)])))
        # The absolute term is scaled by the expected output's RMS (capped at
        # 1), as in the C target: an all-zero or near-zero output cannot pass
        # a loose atol on small-valued outputs.
        rms = float(np.sqrt(np.mean(np.square(w[wfin])))) if wfin.any() else 0.0
        atol_eff = atol * min(1.0, rms)
        both = wfin & np.isfinite(g)
        diff = np.abs(g - w)
        diff[~both] = 0.0
        # Non-finite expected values must be matched exactly (same NaN/Inf).
        nonfin_mismatch = ~wfin & ~((np.isnan(w) & np.isnan(g)) | (w == g))
        tol = atol_eff + rtol * np.abs(w)
        over = (diff > tol) & both
        over |= nonfin_mismatch
        res["max_abs_err"] = max(res["max_abs_err"], float(diff.max()))
        rel = diff / np.maximum(np.abs(w), 1e-30)
        rel[~both] = 0.0
        res["max_rel_err"] = max(res["max_rel_err"], float(rel.max()))
        n = int(over.sum())
        if n and rms > 0 and _within_as_published(diff, w, both, nonfin_mismatch, atol, rtol, rms):
            res["loose_values"] = res.get("loose_values", 0) + n
            n = 0
        hi_err = None
        if wide is not None and k < len(wide):  # its error against the reference's own (error_ratio)
            x = error_ratio(g, w, wide[k])
            if x is not None:
                res["error_ratio"] = max(res.get("error_ratio", 0.0), x)
        if n and wide is not None and k < len(wide) and not nonfin_mismatch.any():
            within, hi_err = _within_reference_error(g, w, wide[k], both, atol, rtol)
            if within:
                res["float32_values"] = res.get("float32_values", 0) + n
                n = 0
        if n and not np.any(g):
            res["mismatches"] += n
            return fail("zeros", "%s is all zeros but the reference's RMS is %.3g: zeros do not pass "
                        "(the absolute tolerance is scaled by the output's RMS)" % (label, rms))
        if n:
            res["mismatches"] += n
            idxs = np.argwhere(over)[:max_report]
            ex = ", ".join("%s: got %.6g want %.6g" % (tuple(i.tolist()), g[tuple(i)], w[tuple(i)]) for i in idxs)
            hi = "" if hi_err is None else (", and it is %.3g from the reference evaluated in float32, "
                                             "more than the reference's own error allows" % hi_err)
            return fail("mismatch", "%s: %d of %d values outside atol=%.3g (scaled to %.3g) rtol=%.3g "
                        "(max abs err %.3g%s); e.g. %s"
                        % (label, n, w.size, atol, atol_eff, rtol, float(diff.max()), hi, ex))
    return res


def _check_case(tests_dir, outputs_dir, cid, atol, rtol, calls, present_only, counts):
    """The results of one case's calls (stopping at the first wrong one)."""
    with open(os.path.join(tests_dir, "expected", cid + ".json")) as f:
        emeta = json.load(f)
    want = load_arrays(os.path.join(tests_dir, "expected", cid + ".npz"), emeta["outputs"], True)
    wide = (load_arrays(os.path.join(tests_dir, "expected", cid + ".f32.npz"), emeta["float32"], True)
            if emeta.get("float32") else None)
    results = []
    for call in calls:
        opath = os.path.join(outputs_dir, "%s.%s.npz" % (cid, call))
        mpath = os.path.join(outputs_dir, "%s.%s.json" % (cid, call))
        if not os.path.isfile(opath) or not os.path.isfile(mpath):
            if present_only:
                continue
            r = {"ok": False, "reason": "missing", "message": "no %s output for case %s" % (call, cid)}
        else:
            with open(mpath) as f:
                ometa = json.load(f)
            got = load_arrays(opath, ometa["outputs"], True)
            r = compare_outputs(got, want, atol, rtol, wide=wide)
            counts["checked_calls"] += 1
            if isinstance(ometa.get("call_s"), (int, float)):
                counts["call_s"].append(ometa["call_s"])
        r.update(case=cid, call=call)
        results.append(r)
        if not r["ok"]:
            break
    return results


def by_configuration(meta, results):
    """What passed per input configuration of a suite frozen from several
    (MaxKernel's list of (dynamic, static) pairs): [{configuration, ok,
    cases, failed, message}] in configuration order, and a sentence; None
    for a suite of one configuration. `meta`: cases.json's entries by id."""
    per = {}
    for r in results:
        k = meta.get(r["case"], {}).get("configuration")
        if k is None:
            return None, ""
        c = per.setdefault(k, {"configuration": k, "ok": True, "cases": [], "failed": None, "message": ""})
        if r["case"] not in c["cases"]:
            c["cases"].append(r["case"])
        if not r["ok"] and c["ok"]:
            c.update(ok=False, failed=r["case"], message=r["message"])
    out = [per[k] for k in sorted(per)]
    if not out:
        return None, ""
    words = ["%d %s" % (c["configuration"], "passed" if c["ok"] else "failed (case %s)" % c["failed"]) for c in out]
    return out, "configurations: " + ", ".join(words)


def far_beyond(verdict, results, meta, atol, rtol):
    """The largest error_ratio of the calls checked (`error_ratio`, with
    its case), and a `warning` when a passing kernel's is over FAR_BEYOND:
    a tolerance far looser than the reference's own precision lets a wrong
    kernel pass (a label-shift bug in a bf16 cross-entropy passed 1e-2 at
    300 times the reference's error)."""
    ratios = [(r["error_ratio"], r["case"]) for r in results if r.get("error_ratio") is not None]
    if not ratios:
        return
    x, cid = max(ratios)
    verdict["error_ratio"], verdict["error_ratio_case"] = x, cid
    if verdict["correct"] and x > FAR_BEYOND:
        tol = meta.get(cid, {}).get("tolerance") or {"atol": atol, "rtol": rtol}
        verdict["warning"] = ("within the tolerance, but %.0fx the reference's own error (case %s: the reference "
                              "against its float32 evaluation): atol=%.3g, rtol=%.3g is far looser than the "
                              "reference's precision, and a wrong kernel can pass under it"
                              % (x, cid, tol["atol"], tol["rtol"]))


def check_outputs(tests_dir, outputs_dir, cases, atol, rtol, calls=("first", "repeat"), present_only=False):
    """Compare run's (or bench's) outputs with expected ones for `cases`
    (numpy only), each within its own tolerance when the freeze recorded
    one (a configuration of a multi-configuration task), else atol/rtol.
    Outputs are <case>.<call>.npz for each call name. The first wrong case
    is the verdict; in a suite of several configurations the others are
    still checked (the rest of a failed configuration's cases are not) and
    `configurations` says what passed in each. With `present_only` (a run
    that ran out of time), a missing output is skipped, not a failure; the
    verdict counts the calls checked (`checked_calls` of `calls`) and their
    seconds (`call_s`, as the run recorded them)."""
    verify_manifest(tests_dir, subset={"expected", "inputs"})
    meta = {c["id"]: c for c in read_cases(tests_dir).get("cases", [])}
    results, verdict = [], {"status": "ok", "correct": True, "message": ""}
    counts = {"checked_calls": 0, "calls": len(cases) * len(calls), "call_s": []}
    failed = set()  # configurations with a wrong case
    for cid in cases:
        m = meta.get(cid, {})
        k = m.get("configuration")
        if k is not None and k in failed:
            continue
        tol = m.get("tolerance") or {"atol": atol, "rtol": rtol}
        rs = _check_case(tests_dir, outputs_dir, cid, tol["atol"], tol["rtol"], calls, present_only, counts)
        results += rs
        if rs and not rs[-1]["ok"]:
            r = rs[-1]
            if verdict["correct"]:
                verdict = {"status": "incorrect", "correct": False, "reason": r["reason"],
                           "message": "case %s (%s call%s): %s" % (cid, r["call"], case_shapes(tests_dir, cid),
                                                                   r["message"])}
            if k is None:
                break
            failed.add(k)
    verdict["cases"] = results
    far_beyond(verdict, results, meta, atol, rtol)
    confs, words = by_configuration(meta, results)
    if confs:
        verdict["configurations"] = confs
        verdict["message"] = "%s; %s" % (words, verdict["message"]) if verdict["message"] else words
    if present_only:
        verdict.update(counts)
    return verdict
