"""Sampled grid execution: a candidate's pallas_call run at the task's own
sizes in TPU interpret mode with its body executed only at a sample of
the points of its independent grid dimensions (the leading dimensions
declared "parallel"), every step of the others in order; the output
blocks that only sampled points write are what is compared. The rewrite
keeps the grid, the index maps and program ids as they are: the body is
wrapped in `pl.when(point is sampled)`, so what runs at a sampled point is
the kernel itself. Refused (NotSampleable, with why) when it cannot be
faithful: no leading parallel dimension, manual DMAs or semaphores (state
that may cross grid points), scalar prefetch, block shapes other than
plain sizes, several pallas_calls, outputs computed after the call."""

import math

SAMPLE_RANDOM = 8  # random points of the sampled dimensions, besides the corners
MAX_CORNERS = 16  # first/last index of every sampled dimension, all combinations up to this many
MAX_WALK = 1 << 21  # grid points whose output block indices are evaluated


class NotSampleable(Exception):
    """The pallas_call cannot be run faithfully on a sample of its grid."""


_STATE = {"active": None}  # while a sampled trace runs: its Trace


class Trace:
    """What one sampled trace saw: the pallas_calls planned, why one was not."""

    def __init__(self, seed):
        self.seed, self.calls, self.refused, self.seen = seed, [], [], 0


def _semantics(cp):
    """The dimension semantics of compiler_params, as lower-case names."""
    sem = getattr(cp, "dimension_semantics", None)
    if sem is None and isinstance(cp, dict):
        sem = (cp.get("mosaic") or cp.get("mosaic_tpu") or {}).get("dimension_semantics")
    return [str(getattr(s, "name", s)).lower().split(".")[-1] for s in (sem or ())]


def _leaves(tree, is_leaf):
    import jax
    return jax.tree_util.tree_leaves(tree, is_leaf=is_leaf)


def _is_spec(x):
    return hasattr(x, "index_map") or x is None


def _block(spec, shape):
    """The block shape as plain sizes (None / Squeezed: 1), or raise."""
    bs = getattr(spec, "block_shape", None)
    if bs is None or len(bs) != len(shape):
        raise NotSampleable("an output's block spec has no block shape of its rank")
    out = []
    for b in bs:
        if b is None or type(b).__name__ == "Squeezed":
            out.append(1)
        elif isinstance(b, int) and not isinstance(b, bool):
            out.append(b)
        elif type(b).__name__ == "Blocked" and isinstance(getattr(b, "block_size", None), int):
            out.append(b.block_size)
        else:
            raise NotSampleable("block dimension %r is not a plain size" % (b,))
    return out


def _memory_refused(specs, scratch):
    for s in specs:
        ms = str(getattr(s, "memory_space", None) or "").lower()
        if "any" in ms or "hbm" in ms or "semaphore" in ms:
            return "an operand in memory space %s (manual DMAs may carry state between grid points)" % ms
    for x in scratch:
        if "semaphore" in (type(x).__name__ + str(x)).lower():
            return "semaphores in its scratch (DMAs may carry state between grid points)"
    return None


def sample_points(sizes, seed):
    """The sampled points of dimensions of `sizes`: every corner (first and
    last index of each, all combinations up to MAX_CORNERS, else the two
    extreme corners and each dimension's last with the others first), and
    SAMPLE_RANDOM random points drawn from `seed`; sorted, distinct."""
    import itertools
    import numpy as np
    ends = [sorted({0, n - 1}) for n in sizes]
    if math.prod(len(e) for e in ends) <= MAX_CORNERS:
        pts = set(itertools.product(*ends))
    else:
        pts = {tuple(0 for _ in sizes), tuple(n - 1 for n in sizes)}
        pts |= {tuple(n - 1 if k == d else 0 for k, n in enumerate(sizes)) for d in range(len(sizes))}
    rng = np.random.default_rng(seed)
    for _ in range(SAMPLE_RANDOM):
        pts.add(tuple(int(rng.integers(0, n)) for n in sizes))
    return sorted(pts)


def _block_indices(jax, imap, grid):
    """(N, rank) block indices of an index map over every point of the grid
    (row-major), vectorised over numpy arrays, else point by point."""
    import numpy as np
    n = math.prod(grid)
    if n > MAX_WALK:
        raise NotSampleable("a grid of %d points, over the %d walked" % (n, MAX_WALK))
    axes = [a.reshape(-1) for a in np.meshgrid(*[np.arange(d, dtype=np.int32) for d in grid], indexing="ij")]
    with jax.ensure_compile_time_eval():
        try:
            idx = imap(*axes)
            idx = idx if isinstance(idx, (tuple, list)) else (idx,)
            cols = [np.broadcast_to(np.asarray(v, dtype=np.int64), (n,)) for v in idx]
        except Exception:  # an index map written for scalars: point by point
            if n > 20000:
                raise NotSampleable("an output index map that takes no arrays, over %d grid points" % n)
            rows = []
            for p in zip(*[a.tolist() for a in axes]):
                v = imap(*p)
                rows.append([int(x) for x in (v if isinstance(v, (tuple, list)) else (v,))])
            return np.asarray(rows, dtype=np.int64).reshape(n, -1)
    return np.stack(cols, axis=1)


class Plan:
    """One pallas_call's sample: the sampled dimensions and points, and per
    output the blocks written only at sampled points ({output, index,
    start, stop})."""

    def __init__(self, grid, dims, points, blocks, total):
        self.grid, self.dims, self.points, self.blocks, self.total = grid, dims, points, blocks, total
        self.unwritten = []

    def describe(self):
        seq = [d for d in range(len(self.grid)) if d not in self.dims]
        steps = ", every step of grid dimension%s %s" % ("s" if len(seq) > 1 else "",
                                                       ", ".join(str(d) for d in seq)) if seq else ""
        return "sampled: %d of %d output blocks%s" % (len(self.blocks), self.total, steps)

    def record(self):
        return {"grid": list(self.grid), "sampled_dims": self.dims, "points": [list(p) for p in self.points],
                "blocks": self.blocks, "total_blocks": self.total, "text": self.describe()}


def _unwritten(idx, block, shape, o):
    """Where the grid leaves output `o` unwritten (its blocks end before the
    array does in some dimension), in words, or None."""
    top = idx.max(axis=0) + 1 if len(idx) else [0] * len(block)
    for k, (t, b, d) in enumerate(zip(top, block, shape)):
        if int(t) * b < d:
            return "the grid writes %d of the %d entries of output %d in dimension %d" % (int(t) * b, d, o, k)
    return None


def _covered(jax, spec, shape, grid, dims, member, o, plan_notes):
    """The blocks of output `o` that only sampled points write, and how many
    blocks the grid writes in all; an output the grid leaves partly
    unwritten is noted in `plan_notes`."""
    import numpy as np
    block = _block(spec, shape)
    idx = _block_indices(jax, spec.index_map, grid)
    gap = _unwritten(idx, block, shape, o)
    if gap:
        plan_notes.append(gap)
    uniq, inv = np.unique(idx, axis=0, return_inverse=True)
    inv = np.asarray(inv).reshape(-1)
    outside = np.bincount(inv, weights=(~member).astype(np.float64), minlength=len(uniq))
    out = []
    for u, bad in zip(uniq.tolist(), outside.tolist()):
        if bad:
            continue
        start = [i * b for i, b in zip(u, block)]
        stop = [min(s + b, d) for s, b, d in zip(start, block, shape)]
        if all(0 <= s < e for s, e in zip(start, stop)):
            out.append({"output": o, "index": u, "start": start, "stop": stop})
    return out, len(uniq)


def plan_call(jax, k, out_shape, seed):
    """The Plan of a pallas_call's keyword arguments `k`, or raise."""
    import numpy as np
    gs = k.get("grid_spec")
    src = gs if gs is not None else None
    grid = getattr(src, "grid", None) if src is not None else k.get("grid", ())
    grid = tuple(grid) if isinstance(grid, (list, tuple)) else (grid,)
    if not grid or not all(isinstance(d, int) and d > 0 for d in grid):
        raise NotSampleable("grid %s is not a tuple of positive sizes" % (grid,))
    if src is not None and int(getattr(src, "num_scalar_prefetch", 0) or 0):
        raise NotSampleable("scalar prefetch (its index maps read operands)")
    if k.get("input_output_aliases"):
        raise NotSampleable("outputs aliased to inputs")
    ins = getattr(src, "in_specs", None) if src is not None else k.get("in_specs")
    outs = getattr(src, "out_specs", None) if src is not None else k.get("out_specs")
    scratch = getattr(src, "scratch_shapes", ()) if src is not None else k.get("scratch_shapes", ())
    in_l, out_l = _leaves(ins, _is_spec), _leaves(outs, _is_spec)
    why = _memory_refused([s for s in in_l + out_l if s is not None], _leaves(scratch, lambda x: False))
    if why:
        raise NotSampleable(why)
    sem = _semantics(k.get("compiler_params"))
    dims = []
    for d in range(len(grid)):
        if d < len(sem) and sem[d] == "parallel":
            dims.append(d)
        else:
            break
    if not dims:
        raise NotSampleable("no leading grid dimension is declared parallel (dimension_semantics %s)"
                            % (sem or "not given: all arbitrary"))
    shapes = _leaves(out_shape, lambda x: hasattr(x, "shape"))
    if len(out_l) != len(shapes) or any(s is None or not hasattr(s, "index_map") for s in out_l):
        raise NotSampleable("out_specs are not one block spec per output")
    points = sample_points([grid[d] for d in dims], seed)
    # which grid points (row-major) are sampled: their sampled coordinates are a sampled point
    coords = np.stack([a.reshape(-1) for a in np.meshgrid(*[np.arange(grid[d]) for d in dims], indexing="ij")], 1)
    rest = math.prod(grid[d] for d in range(len(grid)) if d not in dims)
    keys = {tuple(p) for p in points}
    member = np.repeat(np.fromiter((tuple(c) in keys for c in coords.tolist()), bool, len(coords)), rest)
    blocks, total, gaps = [], 0, []
    for o, (spec, sh) in enumerate(zip(out_l, shapes)):
        b, t = _covered(jax, spec, tuple(sh.shape), grid, dims, member, o, gaps)
        blocks += b
        total += t
    if not blocks:
        raise NotSampleable("no output block is written by sampled grid points alone")
    plan = Plan(grid, dims, points, blocks, total)
    plan.unwritten = gaps  # certain wrong when these outputs are the kernel's (sampling.refusal)
    return plan


def _masked(kernel, plan):
    """The kernel body run only at the plan's sampled points."""
    from jax.experimental import pallas as pl
    from jax._src.pallas import primitives
    import jax.numpy as jnp

    def body(*refs, **kw):
        ids = [primitives.program_id(d) for d in plan.dims]
        hit = None
        for p in plan.points:
            c = None
            for i, v in zip(ids, p):
                c = (i == v) if c is None else jnp.logical_and(c, i == v)
            hit = c if hit is None else jnp.logical_or(hit, c)

        @pl.when(hit)
        def _():
            kernel(*refs, **kw)
    return body


def install(jax):
    """Wrap pl.pallas_call (before the candidate is imported) so that a
    sampled trace (`trace(seed)`) plans each call and masks its body;
    outside one it changes nothing."""
    from jax.experimental import pallas as pl
    if _STATE.get("installed"):  # once a process, whatever wraps it later
        return
    _STATE["installed"] = True
    orig = pl.pallas_call

    def pallas_call(kernel, *a, **k):
        st = _STATE["active"]
        if st is None:
            return orig(kernel, *a, **k)
        st.seen += 1
        out_shape = a[0] if a else k.get("out_shape")
        try:
            plan = plan_call(jax, k, out_shape, st.seed + 7919 * (st.seen - 1))
        except NotSampleable as e:
            st.refused.append(str(e))
            return orig(kernel, *a, **k)
        f = orig(_masked(kernel, plan), *a, **k)

        def call(*args, **kw):
            outs = f(*args, **kw)
            st.calls.append((plan, _leaves(outs, lambda x: False)))
            return outs
        return call
    pl.pallas_call = pallas_call


def count_pallas_calls(jaxpr):
    """pallas_call equations in a jaxpr and the jaxprs inside its
    equations' parameters (not inside a pallas_call)."""
    n = 0
    for eqn in jaxpr.eqns:
        if eqn.primitive.name == "pallas_call":
            n += 1
            continue
        for v in eqn.params.values():
            for sub in (v if isinstance(v, (list, tuple)) else (v,)):
                inner = getattr(sub, "jaxpr", sub)
                if hasattr(inner, "eqns"):
                    n += count_pallas_calls(inner)
    return n


class trace:
    """Context of a sampled trace: pallas_calls traced inside are planned."""

    def __init__(self, seed):
        self.state = Trace(seed)

    def __enter__(self):
        _STATE["active"] = self.state
        return self.state

    def __exit__(self, *exc):
        _STATE["active"] = None


def wrap_outputs(fn, st):
    """`fn`, noting whether its outputs are the sampled pallas_call's own."""
    def outer(*dyn):
        out = fn(*dyn)
        leaves = _leaves(out, lambda x: False)
        st.direct = len(st.calls) == 1 and len(leaves) == len(st.calls[0][1]) and \
            all(a is b for a, b in zip(leaves, st.calls[0][1]))
        return out
    outer.__name__ = getattr(fn, "__name__", "mk_candidate")
    return outer


def _through_transposes(jaxpr):
    """[(the pallas_call's output, permutation)] per output of `jaxpr` when
    each is one of the call's outputs moved by transposes alone (a kernel
    in (B, H, S, D) returning (B, S, H, D)): final axis i is the call
    output's axis permutation[i]; None when anything else is done after
    the call, or the call is not in `jaxpr` itself."""
    calls = [e for e in jaxpr.eqns if e.primitive.name == "pallas_call"]
    if len(calls) != 1:
        return None
    call_out = {v: o for o, v in enumerate(calls[0].outvars)}
    producer = {v: e for e in jaxpr.eqns for v in e.outvars}
    maps = []
    for v in jaxpr.outvars:
        if type(v).__name__ == "Literal":
            return None
        perm = list(range(len(v.aval.shape)))
        while v not in call_out:
            e = producer.get(v)
            if e is None or e.primitive.name != "transpose":
                return None
            p = e.params["permutation"]
            perm = [p[i] for i in perm]
            v = e.invars[0]
        maps.append((call_out[v], perm))
    return maps


def _moved(blocks, maps):
    """The blocks of the call's outputs where they are in the kernel's
    outputs (`maps`, from _through_transposes), and for each the block of
    the call's output it is and the permutation that moves it there;
    blocks of an output the kernel does not return are left out."""
    out, sources = [], []
    for j, (o, perm) in enumerate(maps):
        for b in blocks:
            if b["output"] == o:
                out.append({"output": j, "index": [b["index"][i] for i in perm],
                            "start": [b["start"][i] for i in perm], "stop": [b["stop"][i] for i in perm]})
                sources.append((b, perm))
    return out, sources


def refusal(st, jaxpr):
    """Why a sampled trace (its jaxpr) cannot be judged, or None. Outputs
    that are the call's moved by transposes get their blocks moved with
    them (the plan's blocks are then in the kernel's output coordinates)."""
    if st.refused:
        return st.refused[0]
    jaxpr_calls = count_pallas_calls(jaxpr)
    if jaxpr_calls != st.seen or st.seen == 0:
        return ("%d pallas_call(s) traced, %d through pl.pallas_call: one bound before the harness wrapped it, "
                "or under an inner jit traced earlier" % (jaxpr_calls, st.seen))
    if len(st.calls) != 1:
        return "%d pallas_calls (one is sampled)" % len(st.calls)
    plan = st.calls[0][0]
    if getattr(st, "direct", False):
        plan.sources = [(b, list(range(len(b["start"])))) for b in plan.blocks]
        return None
    maps = _through_transposes(jaxpr)
    if maps is None:
        return "the kernel's outputs are not its pallas_call's outputs (work after the call other than " \
               "transposes, or the call inside vmap or an inner jit)"
    plan.blocks, plan.sources = _moved(plan.blocks, maps)
    if not plan.blocks:
        return "no output block written by sampled grid points alone is among the kernel's outputs"
    return None


def gathered(fn, plan):
    """`fn` returning only the plan's blocks of its outputs (in the plan's
    order): compiled so, the kernel's outputs are never materialised past
    the call (a transpose after it copies 537 MB at 2p GQA's own sizes)."""
    def outer(*dyn):
        leaves = _leaves(fn(*dyn), lambda x: False)
        return [leaves[b["output"]][tuple(slice(s, e) for s, e in zip(b["start"], b["stop"]))] for b in plan.blocks]
    outer.__name__ = getattr(fn, "__name__", "mk_candidate")
    return outer


def split_at_call(closed):
    """(before, call, operand avals): functions of the kernel's traced
    jaxpr `closed` (the sampled trace, refusal() passed) computing the
    pallas_call's operands from the kernel's inputs, and the call alone. Run apart, the
    kernel's inputs are freed before the call runs (at 2p GQA's own sizes
    the inputs and their transposes are 0.67 GB each). None when the call
    is not in the jaxpr itself or its operands are not distinct variables."""
    from jax.extend import core as jcore
    jaxpr = closed.jaxpr
    at = [i for i, e in enumerate(jaxpr.eqns) if e.primitive.name == "pallas_call"]
    if len(at) != 1:
        return None
    eqn = jaxpr.eqns[at[0]]
    ops = list(eqn.invars)
    if any(type(v).__name__ == "Literal" for v in ops) or len(set(ops)) != len(ops):
        return None
    before = jcore.Jaxpr(jaxpr.constvars, jaxpr.invars, ops, jaxpr.eqns[:at[0]])
    call = jcore.Jaxpr([], ops, list(eqn.outvars), [eqn])
    return (jcore.jaxpr_as_fun(jcore.ClosedJaxpr(before, closed.consts)),
            jcore.jaxpr_as_fun(jcore.ClosedJaxpr(call, [])), [v.aval for v in ops])


def call_blocks(outs, plan):
    """The plan's blocks (numpy, in the plan's order) from the pallas_call's
    own outputs `outs`, each moved as the kernel moves it."""
    import numpy as np
    return [np.transpose(np.asarray(outs[b["output"]][tuple(slice(s, e) for s, e in zip(b["start"], b["stop"]))]),
                         perm) for b, perm in plan.sources]
