"""The reference at the task's own sizes in chunks, for a task whose
reference XLA cannot hold at once within a harness process's memory
(2p GQA at 4096 tokens with 128 heads materialises 39 GB of scores).

A chunk plan splits one or more axis positions of every array (each
input and each output) into equal parts, part k of the outputs taken
as the reference of part k of the inputs: the batch of a batched
operation, the heads of attention (query head h with kv head h // G:
split in proportion, 128 query heads and 8 kv heads into 8 parts of 16
and 1). Nothing about the reference is assumed: an axis is used only
when, on the test scale's own case, the reference split along it the
same way gives the unsplit reference's outputs (to a tenth of the task's
tolerance, or within a low-precision reference's own rounding). A reference that mixes its batch (a normalisation across
it), groups its heads another way (h % Hkv) or reads a size it was not
given fails that and is refused, as before, at the task's own sizes.
"""

import itertools
import math
import os

from .compare import compare_outputs
from .jaxcall import _leaves, _to_numpy, jit_static

OVERHEAD_BYTES = 512 << 20  # the JAX runtime and a chunk's copies beside XLA's own accounting
# A run grows the process by more than XLA's memory analysis counts for it:
# 2p GQA, one part of 16 query heads: 2.2 GB counted, 3.3 GB measured (in
# bfloat16 and in float32); 1p's flash attention at the widths tier's
# 4 x 8 x 4096 x 8, whole: 2.16 GB counted, 4.46 GB measured (the process's
# own 0.3 GB included). The count is taken this much larger.
XLA_UNDERCOUNT = 2.0
# What a harness process running a reference may hold (the 4 GB on
# a 24 GB machine shared by two evaluations and the engine), or 4/5 of its
# memory limit when that is less: a reference that would need more is run
# in equal parts (plan, in_parts, run) or refused, saying why.
PROCESS_BYTES = 4e9


def bound(mem):
    """The bytes a reference's run may hold in a process whose memory limit
    is `mem` bytes (0: none): PROCESS_BYTES, or 4/5 of the limit when less."""
    return min(0.8 * mem, PROCESS_BYTES) if mem else PROCESS_BYTES


def estimate(need, resident=0):
    """The bytes a process holds running a program XLA counts at `need`
    bytes, with `resident` bytes of its own beside it."""
    return need * XLA_UNDERCOUNT + resident + OVERHEAD_BYTES


def fits_whole(need, mem, resident=0):
    """Whether a reference XLA counts at `need` bytes may still run whole
    when no split of it checks out: by XLA's own count (not the estimate:
    8p's GEMM at its own sizes is counted 2.95 GB and measured at 3.3 GB,
    1p's attention is counted half of what it takes) within 4/5 of the
    process's memory limit `mem` (none: always); the limit's watch ends
    it if the count was low."""
    return not mem or need + resident + OVERHEAD_BYTES <= 0.8 * mem


SPILL_BYTES = 64 << 20  # an input this large is read from a file, part by part, while the parts run


class Spilled:
    """An input written to a file: each slice taken is read through a
    mapping opened for it alone, so the process holds the part it runs and
    never the whole (2p GQA's query is 537 MB; pages read through one
    long-lived mapping would count in its resident memory again)."""

    def __init__(self, x, path):
        import numpy as np
        np.ascontiguousarray(x).tofile(path)
        self.path, self.dtype, self.shape = path, x.dtype, tuple(x.shape)
        self.size, self.ndim = int(x.size), len(x.shape)

    def __getitem__(self, sl):
        import numpy as np
        m = np.memmap(self.path, dtype=self.dtype, mode="r", shape=self.shape)
        try:
            return np.array(m[sl])
        finally:
            del m


def as_numpy(dyn):
    """The inputs as numpy arrays (a Spilled one as it is). The caller
    drops its own list: a JAX array read as numpy keeps both copies."""
    return [_to_numpy(x) if hasattr(x, "shape") and not isinstance(x, Spilled) else x for x in dyn]


def resident_bytes(dyn):
    """Bytes of the inputs this process holds (a Spilled one is on disk)."""
    return sum(int(x.size) * x.dtype.itemsize for x in dyn if hasattr(x, "shape") and not isinstance(x, Spilled))


def xla_bytes(compiled):
    """The bytes XLA's compiled program holds (its arguments, outputs and
    temporaries), or None when it does not say."""
    try:
        m = compiled.memory_analysis()
        return int(m.temp_size_in_bytes) + int(m.argument_size_in_bytes) + int(m.output_size_in_bytes)
    except Exception:  # a backend without the analysis
        return None


def spill(np_dyn, where):
    """The inputs with the large arrays Spilled under `where` (the caller
    drops its own list; the files go with `where`)."""
    os.makedirs(where, exist_ok=True)
    return [Spilled(x, os.path.join(where, "input%d.bin" % i)) if hasattr(x, "shape") and x.nbytes >= SPILL_BYTES
            else x for i, x in enumerate(np_dyn)]


def axis_sizes(in_shapes, out_shapes):
    """{axis position: gcd of every array's size there} for the positions
    every input array and output has, where that gcd is over 1."""
    shapes = list(in_shapes) + list(out_shapes)
    if not shapes:
        return {}
    out = {}
    for p in range(min(len(s) for s in shapes)):
        g = 0
        for s in shapes:
            g = math.gcd(g, int(s[p]))
        if g > 1:
            out[p] = g
    return out


def _smallest_factor(n):
    for d in range(2, int(math.isqrt(n)) + 1):
        if n % d == 0:
            return d
    return n


def choose(sizes, whole_bytes, budget, usable=None):
    """{axis position: parts}: the fewest parts, by splitting the lowest
    positions first by their smallest factors, that bring the estimated
    bytes of one chunk (`whole_bytes` over the number of chunks) within
    `budget`; None when every usable position is split as far as it goes
    and a chunk is still over."""
    parts = {}
    order = sorted(p for p in sizes if usable is None or p in usable)

    def chunks():
        return math.prod(parts.values()) if parts else 1

    while whole_bytes / chunks() > budget:
        for p in order:
            left = sizes[p] // parts.get(p, 1)
            if left > 1:
                parts[p] = parts.get(p, 1) * _smallest_factor(left)
                break
        else:
            return None
    return parts


def _slices(shape, parts, k):
    """The slices of chunk `k` ({axis: index}) of an array of `shape`."""
    out = []
    for p, n in enumerate(shape):
        m = parts.get(p, 1)
        step = int(n) // m
        out.append(slice(k.get(p, 0) * step, (k.get(p, 0) + 1) * step) if m > 1 else slice(None))
    return tuple(out)


def _indices(ranges):
    """Every {axis: index} with each axis's index in its range ({axis: range})."""
    keys = sorted(ranges)
    return [dict(zip(keys, c)) for c in itertools.product(*(ranges[p] for p in keys))]


def _chunk_indices(parts):
    return _indices({p: range(m) for p, m in parts.items()})


def _chunk_inputs(jax, np_dyn, parts, k):
    return [jax.device_put(np_dyn_x[_slices(np_dyn_x.shape, parts, k)]) if hasattr(np_dyn_x, "shape") else np_dyn_x
            for np_dyn_x in np_dyn]


def _part_args(jax, np_dyn, parts, k, widen=False):
    """The arguments of chunk `k`'s call (its arrays, bfloat16/float16
    widened to float32 with `widen`; the static values left out)."""
    import numpy as np
    from .freeze import _narrow
    args = _chunk_inputs(jax, np_dyn, parts, k)
    return [x.astype(np.float32) if widen and _narrow(x) else x for x in args if hasattr(x, "shape")]


def compiled_chunk(jax, fn, np_dyn, parts):
    """The reference compiled at the shapes of one chunk (all chunks share them)."""
    first = _chunk_inputs(jax, np_dyn, parts, {p: 0 for p in parts})
    return jit_static(jax, fn, first).lower(*first).compile()


def run(jax, fn, dyn, parts, out_shapes, compiled=None, where=None):
    """The reference's outputs (numpy) of `dyn` computed chunk by chunk
    under plan `parts`, each chunk's outputs written into their place:
    with `where`, into files there, through a mapping opened for each
    part (the outputs are not resident while the parts run), and read
    back whole at the end."""
    import numpy as np
    np_dyn = as_numpy(dyn)
    compiled = compiled or compiled_chunk(jax, fn, np_dyn, parts)
    if where:
        os.makedirs(where, exist_ok=True)
        paths = [os.path.join(where, "output%d.bin" % i) for i in range(len(out_shapes))]
        for path, sh in zip(paths, out_shapes):
            with open(path, "wb") as f:
                f.truncate(int(math.prod(sh.shape)) * np.dtype(sh.dtype).itemsize)
    else:
        outs = [np.empty(tuple(s.shape), dtype=s.dtype) for s in out_shapes]
    for k in _chunk_indices(parts):
        for i, got in enumerate(_leaves(compiled(*_part_args(jax, np_dyn, parts, k)))):
            sh = out_shapes[i]
            o = np.memmap(paths[i], dtype=sh.dtype, mode="r+", shape=tuple(sh.shape)) if where else outs[i]
            o[_slices(o.shape, parts, k)] = _to_numpy(got)
            if where:
                o.flush()
                del o
    if where:
        outs = [np.fromfile(path, dtype=sh.dtype).reshape(tuple(sh.shape)) for path, sh in zip(paths, out_shapes)]
    return outs


def verify(jax, fn, dyn, parts, tol):
    """None when the reference of the test-scale inputs `dyn` split by
    `parts` (each axis in at most as many parts as those sizes allow)
    gives its unsplit outputs to a tenth of the tolerance, or, for a
    reference in bfloat16/float16 (whose evaluations at other shapes round
    differently: 1 ulp on half of 2p GQA's outputs), as near its float32
    evaluation as the unsplit one is (compare_outputs `wide`, the
    tolerance's tenth); else why not."""
    whole = [_to_numpy(o) for o in _leaves(jit_static(jax, fn, dyn)(*dyn))]
    shapes = [x.shape for x in dyn if hasattr(x, "shape")]
    sizes = axis_sizes(shapes, [o.shape for o in whole])
    small = {}
    for p, m in parts.items():
        g = math.gcd(m, sizes.get(p, 1))
        if g < 2:
            return "at the test scale axis %d cannot be split as at the task's own sizes" % p
        small[p] = g
    shape_of = [jax.ShapeDtypeStruct(o.shape, o.dtype) for o in whole]
    try:
        split = run(jax, fn, dyn, small, shape_of)
    except Exception as e:  # the reference's own code on other shapes
        return "the reference fails on a part of its inputs (%s)" % (str(e).splitlines() or [""])[0][:200]
    from .freeze import reference_in_float32
    try:  # a low-precision reference's own rounding, by which two of its evaluations may differ
        hi = reference_in_float32(jax, fn, dyn, whole)
    except Exception:  # not available: the split must then agree within the tolerance's tenth alone
        hi = None
    c = compare_outputs(split, whole, tol["atol"] / 10, tol["rtol"] / 10, wide=hi)
    if not c["ok"]:
        return ("split along axis %s the reference's outputs differ from its unsplit ones at the test scale (%s)"
                % (", ".join(str(p) for p in sorted(small)), c["message"][:200]))
    return None


def in_parts(jax, fn, parts):
    """`fn` computed part by part in one XLA program: each array argument
    (the Python values are static) cut into the equal parts of plan
    `parts` ({axis: parts}), the parts stacked and mapped over by
    lax.map (a loop: one part's temporaries at a time), and each output
    put back together, part k of it in the place of part k of the inputs
    (as run() puts them). 1p's reference at the widths tier in 8 parts:
    XLA counts 0.57 GB instead of 2.16 GB, outputs bit-identical."""
    jnp = jax.numpy
    axes = sorted(parts)

    def cut(x):  # (n0, n1, ...) -> (parts, part shape...)
        shape, lead = [], []
        for p, n in enumerate(x.shape):
            if p in parts:
                lead.append(len(shape))
                shape += [parts[p], int(n) // parts[p]]
            else:
                shape.append(int(n))
        rest = [i for i in range(len(shape)) if i not in lead]
        y = jnp.transpose(x.reshape(shape), lead + rest)
        return y.reshape((-1,) + tuple(shape[i] for i in rest))

    def join(y):  # (parts, part shape...) -> the whole
        part = y.shape[1:]
        y = y.reshape(tuple(parts[p] for p in axes) + tuple(part))
        order = []
        for p in range(len(part)):
            if p in parts:
                order.append(axes.index(p))
            order.append(len(axes) + p)
        return jnp.transpose(y, order).reshape(tuple(n * parts.get(p, 1) for p, n in enumerate(part)))

    def whole(*dyn):
        at = [i for i, x in enumerate(dyn) if hasattr(x, "shape")]

        def one(xs):
            args = list(dyn)
            for i, x in zip(at, xs):
                args[i] = x
            return fn(*args)
        out = jax.lax.map(one, tuple(cut(dyn[i]) for i in at))
        return jax.tree_util.tree_map(join, out)
    whole.__name__ = getattr(fn, "__name__", "mk_reference")  # the timed module keeps its name
    return whole


def base_check(jax, task, ref, base):
    """split_why(parts): why the reference split by `parts` is not its
    unsplit self (verify) on the first case of the test scale's suite
    `base`, or None when it is."""
    from .inputs import config_scope, entry_fn, frozen_case_inputs
    from .suite import case_ids, read_case
    cid = case_ids(base)[0]
    meta = read_case(base, cid)
    with config_scope(ref, meta.get("config")):
        small, statics = frozen_case_inputs(base, cid)
    small_fn = entry_fn(task, ref, statics)

    def split_why(p):
        with config_scope(ref, meta.get("config")):
            return verify(jax, small_fn, small, p, task["tolerance"])
    return split_why


def plan(sizes, need, budget, split_why, part_bytes, refuse):
    """The plan ({axis: parts}) of a reference XLA counts at `need` bytes
    whole, each part within `budget` bytes of XLA's count, and what
    `part_bytes(parts)` returned for it: the fewest parts along the axes
    `sizes` ({axis: size}) for which `split_why` (base_check) finds no
    difference, each axis checked alone (one that mixes its parts is left
    out and the plan made again) and the plan jointly; `part_bytes(plan)`
    = (XLA's count of a part's run, what to keep of it) says whether the
    estimate holds, and when it does not (a part's temporaries do not
    shrink with it alone) the split goes further. `refuse(why)` raises."""
    usable, tried, checked = set(sizes), [], set()

    def checked_jointly(p):
        why = split_why(p) if len(p) > 1 else None
        if why:
            refuse("it cannot be computed in parts: " + why)
    while True:
        parts = choose(sizes, need, budget, usable) if budget > 0 else None
        if not parts:
            refuse("no split of its arrays into equal parts brings a part within %.3g MB%s"
                   % (max(budget, 0) / 1e6, (" (" + "; ".join(tried) + ")") if tried else ""))
        for p in [p for p in sorted(parts) if p not in checked]:
            why = split_why({p: parts[p]})
            if why:
                usable.discard(p)
                tried.append(why)
                break
            checked.add(p)
        else:
            break
    checked_jointly(parts)
    for _ in range(4):
        got, kept = part_bytes(parts)
        if not got or got <= budget:
            return parts, kept
        n = math.prod(parts.values())
        finer = choose(sizes, got * n, budget, checked)
        if not finer or math.prod(finer.values()) <= n:
            refuse("in %d parts one still needs %.3g MB, over %.3g MB" % (n, got / 1e6, budget / 1e6))
        parts = finer
        checked_jointly(parts)
    refuse("no split found within %.3g MB a part" % (budget / 1e6))


def part_of(block, shape, parts):
    """The chunk indices ({axis: index}) that block {start, stop} of an
    output of `shape` overlaps under `parts`."""
    step = {p: int(shape[p]) // m for p, m in parts.items()}
    return _indices({p: range(block["start"][p] // step[p], (block["stop"][p] - 1) // step[p] + 1) for p in parts})


def blocks_wide(jax, fn, dyn, parts, out_shapes, blocks, budget, mem=0):
    """The reference evaluated in float32 (its bfloat16/float16 inputs
    widened, part by part) on `blocks` only, one float32 array per block;
    None, why when one part would need more than `budget` bytes by the
    estimate and, the parts being the freeze's (2p GQA's 32 are as many as
    its 8 kv heads allow), more than the memory limit `mem` by XLA's own
    count (fits_whole: 2p's float32 part is counted 2.2 GB, taken as
    4.4 GB by the estimate, and its step measured at 3.7 GB)."""
    import numpy as np
    from .freeze import _narrow
    np_dyn = as_numpy(dyn)
    # compiled for the first chunk's widened inputs, static values included (as the reference takes them)
    first = [x.astype(np.float32) if _narrow(x) else x for x in _chunk_inputs(jax, np_dyn, parts, {p: 0 for p in parts})]
    compiled = jit_static(jax, fn, first).lower(*first).compile()
    del first
    need = xla_bytes(compiled)
    if need and need * XLA_UNDERCOUNT > budget and not (mem and fits_whole(need, mem, resident_bytes(np_dyn))):
        return None, ("its float32 evaluation needs %.3g MB a part (XLA's count x %.1f), over %.3g MB, and XLA's own "
                      "count is over 4/5 of the memory limit" % (need * XLA_UNDERCOUNT / 1e6, XLA_UNDERCOUNT,
                                                                  budget / 1e6))
    out = [np.full([e - s for s, e in zip(b["start"], b["stop"])], np.nan, np.float32) for b in blocks]
    wanted = {}
    for i, b in enumerate(blocks):
        for k in part_of(b, out_shapes[b["output"]].shape, parts):
            wanted.setdefault(tuple(sorted(k.items())), []).append(i)
    for key, which in sorted(wanted.items()):
        k = dict(key)
        got = [_to_numpy(o) for o in _leaves(compiled(*_part_args(jax, np_dyn, parts, k, widen=True)))]
        for i in which:
            b = blocks[i]
            sl = _slices(out_shapes[b["output"]].shape, parts, k)
            # the part's span in output coordinates, intersected with the block's
            lo = [max(s, x.start or 0) for s, x in zip(b["start"], sl)]
            hi = [min(e, x.stop if x.stop is not None else e) for e, x in zip(b["stop"], sl)]
            src = tuple(slice(l - (x.start or 0), h - (x.start or 0)) for l, h, x in zip(lo, hi, sl))
            dst = tuple(slice(l - s, h - s) for l, h, s in zip(lo, hi, b["start"]))
            out[i][dst] = got[b["output"]][src].astype(np.float32)
    return out, None
