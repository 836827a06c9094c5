"""Escalation: a kernel whose blocks were chosen for the task's own sizes
(an empty grid, a block larger than its array, a grid that leaves an output
unwritten, its own shape check) cannot be judged at a shrunk test scale.
The signs of it (scale hints, from every pallas_call traced) give a
"rescale" answer instead of a verdict; the engine re-tests the kernel at
larger scales."""

import math
import os
import traceback

from . import scaling
from .suite import read_case, read_cases
from .jaxcall import jit_static
from .inputs import config_scope, entry_fn, reference_module


_SCALE_HINTS = []  # why the kernel looks made for larger sizes, from the pallas_calls traced
_CASE_HINTS = {}  # case id -> the block hints of a scaled case that lowered (candidate.lower_checked)


class Rescale(Exception):
    """The case is test-scaled and the kernel is not made for it: no verdict
    here (status "rescale"); the engine re-tests it at a larger scale."""

    def __init__(self, cid, why):
        super().__init__(why)
        self.result = {"status": "rescale", "case": cid, "reason": why,
                       "message": "case %s is test-scaled and the kernel is made for larger sizes: %s" % (cid, why)}


def _spec_list(specs):
    if specs is None:
        return []
    return list(specs) if isinstance(specs, (list, tuple)) else [specs]


def _block_over(spec, shape, name):
    block = getattr(spec, "block_shape", None)
    if block is None or shape is None or len(block) != len(shape):
        return None
    if any(isinstance(b, int) and not isinstance(b, bool) and b > d for b, d in zip(block, shape)):
        return "block %s of %s exceeds its shape %s" % (tuple(block), name, tuple(shape))
    return None


MAX_GRID_WALK = 4096  # grid points whose output block indices are evaluated (_uncovered)


def _uncovered(spec, shape, grid, name):
    """A grid that leaves part of an output unwritten in some dimension (a
    floor-divided grid, 3584 // 2048 = 1, for sizes that are not multiples
    of the blocks, as a test scale's are), from the spec's index map at
    every grid point; None when it covers or cannot be told."""
    block, imap = getattr(spec, "block_shape", None), getattr(spec, "index_map", None)
    if block is None or imap is None or shape is None or len(block) != len(shape) or not grid:
        return None
    if any(not isinstance(d, int) for d in grid) or not 0 < math.prod(grid) <= MAX_GRID_WALK:
        return None
    import itertools
    top = [0] * len(block)
    for point in itertools.product(*[range(d) for d in grid]):
        idx = imap(*point)
        for k, v in enumerate(idx if isinstance(idx, (tuple, list)) else (idx,)):
            top[k] = max(top[k], int(v) + 1)
    for k, (b, d) in enumerate(zip(block, shape)):
        if isinstance(b, int) and not isinstance(b, bool) and b <= d and top[k] * b < d:
            return "the grid writes %d of the %d entries of %s in dimension %d" % (top[k] * b, d, name, k)
    return None


def scale_hints(grid, in_specs, out_specs, operands, outputs):
    """Signs, in one pallas_call, that its sizes are smaller than the kernel
    was written for: a grid with an empty dimension, a block larger than
    its array in some dimension, a grid that does not cover an output."""
    g = tuple(grid) if isinstance(grid, (list, tuple)) else (grid,) if isinstance(grid, int) else ()
    hints = ["empty grid %s" % (g,)] if any(isinstance(d, int) and d == 0 for d in g) else []
    pairs = [(sp, getattr(x, "shape", None), "input %d" % i) for i, (sp, x) in
             enumerate(zip(_spec_list(in_specs), operands))]
    outs = [(sp, getattr(x, "shape", None), "output %d" % i) for i, (sp, x) in
            enumerate(zip(_spec_list(out_specs), outputs))]
    hints += [h for h in (_block_over(*p) for p in pairs + outs) if h]
    if not hints:
        for sp, shape, name in outs:
            try:
                h = _uncovered(sp, shape, g, name)
            except Exception:  # an index map that needs more than grid indices: no sign from it
                h = None
            hints += [h] if h else []
    return hints


def _record_hints(jax, k, args):
    gs = k.get("grid_spec")
    src = gs if gs is not None else None
    grid = getattr(src, "grid", None) if src is not None else k.get("grid", ())
    ins = getattr(src, "in_specs", None) if src is not None else k.get("in_specs")
    outs = getattr(src, "out_specs", None) if src is not None else k.get("out_specs")
    pre = int(getattr(src, "num_scalar_prefetch", 0) or 0) if src is not None else 0
    out_shape = jax.tree_util.tree_leaves(k.get("out_shape"), is_leaf=lambda x: hasattr(x, "shape"))
    _SCALE_HINTS.extend(scale_hints(grid, ins, outs, list(args)[pre:], out_shape))


def watch_pallas_calls(jax):
    """Wrap pl.pallas_call (before the candidate is imported) so that every
    call traced records its scale hints in _SCALE_HINTS. Never changes what
    the call does; a failure to read the specs records nothing."""
    from jax.experimental import pallas as pl
    orig = pl.pallas_call
    if getattr(orig, "_mk_watch", False):
        return

    def pallas_call(*a, **k):
        f = orig(*a, **k)
        if a[1:2]:
            k = dict(k, out_shape=a[1])

        def call(*args, **kw):
            try:
                _record_hints(jax, k, args)
            except Exception:  # reading specs is best effort: the call itself decides
                pass
            return f(*args, **kw)
        return call
    pallas_call._mk_watch = True
    pl.pallas_call = pallas_call


def own_check_raised(exc, candidate_path):
    """Whether the exception (or one it came from) was raised by a `raise` or
    `assert` statement of the candidate itself: its own shape check."""
    seen = 0
    while exc is not None and seen < 5:
        tb = traceback.extract_tb(exc.__traceback__)
        if tb and os.path.abspath(tb[-1].filename) == os.path.abspath(candidate_path) and \
                (tb[-1].line or "").lstrip().startswith(("raise", "assert")):
            return True
        exc, seen = exc.__cause__ or exc.__context__, seen + 1
    return False


def traces_at_own_sizes(jax, task, mod):
    """Whether the candidate traces at the task's own sizes, abstractly
    (inputs as shapes from the inputs function under the task's own
    CONFIG; nothing is made or run). A kernel that fails to trace at a
    test-scaled case but traces there was made for those sizes (a splash
    kernel's mask tables, made with numpy for whole blocks): the failure
    is the scale's, not the kernel's."""
    hints = list(_SCALE_HINTS)
    try:
        ref = reference_module(task)
        ab = scaling._abstract_inputs(jax, task, ref, None, None)
        if ab is None:
            return False
        dyn, statics = ab
        with config_scope(mod, dict(getattr(ref, "CONFIG", None) or {}), strict=False):
            jit_static(jax, entry_fn(task, mod, statics), dyn).trace(*dyn)
        return True
    except Exception:  # it fails there too: its own fault
        return False
    finally:
        _SCALE_HINTS[:] = hints


def case_is_scaled(tests_dir, cid):
    """Whether a frozen case's sizes were shrunk from the task's own: it
    records a scale factor above 1, or one of its CONFIG entries has the
    shrunk value (a TEST_CONFIGS entry's own sizes are the task's choice)."""
    if not tests_dir or not cid:
        return False
    info, meta = read_cases(tests_dir), read_case(tests_dir, cid)
    if (meta.get("scale_factor") or (info.get("scale") or {}).get("factor") or 1) > 1:
        return True
    cfg = meta.get("config") or {}
    return any(k in cfg and cfg[k] == v for k, v in (info.get("scaled_config") or {}).items())


def rescale_instead(cid, verdict):
    """A run-time failure (crash, out-of-bounds, race) of a scaled case whose
    blocks exceed its arrays: the Rescale result instead of blaming it."""
    if cid in _CASE_HINTS:
        return Rescale(cid, "%s, and then: %s" % (_CASE_HINTS[cid], (verdict.get("message") or "")[:300])).result
    return None
