"""The test scale of a Pallas task: sizes small enough to check kernels on a
CPU, chosen per task by running its reference (docs/targets/pallas.md,
"Test scale").

A task's sizes live in its module `CONFIG`, in a `CONFIG` dict local to its
inputs function (MaxKernel's get_inputs), or as integers written in the
inputs function itself (`batch_size, n = 128, 64`, `(4096, 8192)`). Each is
a *size symbol*. One common factor f divides them all (never below FLOOR);
sizes the task derives from them (`kv_lora_rank + rope_dim`, `M // G`) are
recomputed by the task's own code, so related sizes stay related. The
search tries factors from the smallest sizes towards the task's own and
keeps the first at which the reference runs within the limits and gives a
non-trivial output (finite, not constant, and changed when its largest
input changes). Parsing and planning need no JAX; choose() runs it.
"""

import ast
import os
import re

from . import chunked
from .compare import compare_outputs
from .errors import HarnessError
from .inputs import config_scope, entry_fn, make_inputs
from .jaxcall import _WithStatics, _clock, _leaves, _to_numpy, jit_static, static_positions
from .limits import PHASE

FLOOR = 8          # no size scales below this (nor do sizes at or below it change)
TARGET = 256       # the first factor tried brings the largest size to about this
START_FLOPS = 2e9      # FLOPs of one reference call at the first scale accepted...
FLOP_BUDGET = 2e10     # ... and at a larger one, tried when smaller sizes give a trivial output
FULL_FLOP_BUDGET = 1e12  # ... of a task with no sizes to scale (its own sizes are the only choice)
# ... at a factor asked for (freeze --scale-factor: escalating a kernel made
# for larger sizes, bounded by its own time limit; 1p's flash attention at
# the widths tier's 4 x 8 x 4096 x 8 is 2.1e10, about 12 s a call here)
FACTOR_FLOP_BUDGET = 5e10
SCALED_INPUT_BYTES = 256 << 20  # inputs of one case at a scaled (f > 1) scale
SEARCH_S = 240     # seconds of search; no new factor is tried after them

# Integer entries that are not sizes (tolerances, seeds, constants of the math).
NOT_SIZE = re.compile(r"seed|tol|eps|theta|rate|prob|dropout|scale|factor|value|alpha|beta|temp|base|^p$|_p$",
                      re.I)
INDEPENDENT = "the output does not change when the largest input does"
CONSTANT = "the reference's output is constant"
ZEROS = "the reference's output is all zeros"
# Refusals that say something of the task rather than of its sizes (26k's
# norm over 1x1 planes ignores its weight, 25k's mean of a group norm is
# mean(beta) for every sample): after three factors in a row the search
# stops, and when nothing else is accepted the first is used, with a
# warning. An all-zero output is never frozen.
TASK_PROPERTIES = (INDEPENDENT, CONSTANT)
# Sizes of a model's width (heads, head and hidden dimensions, channels,
# features): tables of lengths and offsets a task writes at module level
# (ragged attention's per-sequence lengths) index the other sizes, never
# these, so when scaling every size breaks the reference, the widths alone
# are scaled (the "widths" tier).
WIDTH = re.compile(r"head|dim|hidden|channel|feature|embed|d_model|width|^[HD]$", re.I)  # H, D: MaxKernel 1p
# Head counts (num_q_heads, num_kv_heads): grouped-query attention needs
# the query heads to stay a multiple of the KV heads, in the same ratio, so
# they are scaled together (keep_ratios), KV heads of 8 or less included.
HEADS = re.compile(r"heads", re.I)
# Calls whose integer arguments are keys or counts of keys, never sizes.
KEY_CALLS = ("key", "PRNGKey", "split", "fold_in", "seed")


def is_size(name, v):
    return isinstance(v, int) and not isinstance(v, bool) and v > FLOOR and not NOT_SIZE.search(str(name))


def is_heads(name, v):
    """A head count (HEADS), of any value: a symbol even at or below FLOOR."""
    return isinstance(v, int) and not isinstance(v, bool) and v > 0 and bool(HEADS.search(str(name)))


def _symbol(name, v):
    return is_size(name, v) or is_heads(name, v)


def scaled(v, f):
    """The size v at factor f: v // f, never below FLOOR (sizes at or below
    FLOOR stay)."""
    if f <= 1 or v <= FLOOR:
        return v
    return max(FLOOR, v // f)


# ---------------------------------------------------------------- symbols

def _function(tree, name):
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == name:
            return node
    return None


def _call_name(node):
    f = node.func
    return f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""


def _assign_names(node):
    """(name, Constant) pairs of `a = 5`, `a = b = 5` and `a, b = 5, 6`."""
    out = []
    for t in node.targets:
        if isinstance(t, ast.Name) and isinstance(node.value, ast.Constant):
            out.append((t.id, node.value))
        elif (isinstance(t, ast.Tuple) and isinstance(node.value, ast.Tuple)
              and len(t.elts) == len(node.value.elts)):
            out += [(n.id, v) for n, v in zip(t.elts, node.value.elts)
                    if isinstance(n, ast.Name) and isinstance(v, ast.Constant)]
    return out


def _dict_entries(node):
    """(CONFIG['key'], Constant) pairs of a local `CONFIG = {...}` literal."""
    if not (isinstance(node.value, ast.Dict) and any(isinstance(t, ast.Name) for t in node.targets)):
        return []
    return [("CONFIG[%r]" % k.value, v) for k, v in zip(node.value.keys, node.value.values)
            if isinstance(k, ast.Constant) and isinstance(k.value, str) and isinstance(v, ast.Constant)
            and _symbol(k.value, v.value)]


def _key_constants(fn):
    """Constants under calls of KEY_CALLS (jax.random.key(42), split(k, 8))."""
    ids = set()
    for node in ast.walk(fn):
        if isinstance(node, ast.Call) and _call_name(node) in KEY_CALLS:
            ids.update(id(c) for c in ast.walk(node) if isinstance(c, ast.Constant))
    return ids


def inputs_constants(fn):
    """The size constants written in an inputs function, as
    [(symbol, Constant node)]: named assignments by name, local CONFIG
    entries by key, other integers (shape literals) by value ('#4096')."""
    out, seen = [], set()
    for node in ast.walk(fn):
        if isinstance(node, ast.Assign):
            pairs = _dict_entries(node) or [(n, c) for n, c in _assign_names(node) if _symbol(n, c.value)]
            for name, c in pairs:
                out.append((name, c))
                seen.add(id(c))
            if isinstance(node.value, ast.Dict):
                seen.update(id(c) for c in ast.walk(node.value) if isinstance(c, ast.Constant))
            seen.update(id(c) for n, c in _assign_names(node))  # a non-size name is never scaled
    skip = _key_constants(fn) | seen
    for node in ast.walk(fn):
        if (isinstance(node, ast.Constant) and id(node) not in skip and is_size("", node.value)):
            out.append(("#%d" % node.value, node))
    return out


def pinned_values(tree, entry):
    """Sizes the computation itself writes down: {"names": {name: v}} of its
    named assignments (`num_groups = 64`) and {"values": set} of the other
    sizes it writes (`reshape(-1, 4096)`). See is_pinned."""
    fn = _function(tree, entry)
    out = {"names": {}, "values": set()}
    if fn is None:
        return out
    named = set()
    for node in ast.walk(fn):
        if isinstance(node, ast.Assign):
            for n, c in _assign_names(node):
                if is_size(n, c.value):
                    out["names"][n] = c.value
                named.add(id(c))
    out["values"] = {c.value for c in ast.walk(fn) if isinstance(c, ast.Constant) and id(c) not in named
                     and is_size("", c.value)}
    return out


def is_pinned(name, v, pins):
    """A size symbol keeps its value when the computation writes it down: a
    symbol of a name it assigns (`out_features = 8192`), a number it writes
    in its code, or a bare number of the inputs function ('#8192') equal to
    a size it assigns. A symbol of another name that merely has the same
    value (`in_features = 8192`) is scaled."""
    if v in pins["values"]:
        return True
    key = name[len("CONFIG['"):-2] if name.startswith("CONFIG['") else name
    return key in pins["names"] or (name.startswith("#") and v in pins["names"].values())


def symbols(source, inputs_fn, config, entry=None):
    """Size symbols of a task: {"config": {key: v}, "inputs": {symbol: v},
    "pinned": {symbol: v}} (pinned: not scaled, see is_pinned)."""
    tree = ast.parse(source)
    pins = pinned_values(tree, entry) if entry else {"names": {}, "values": set()}
    out = {"config": {}, "inputs": {}, "pinned": {}}
    for k, v in (config or {}).items():
        if _symbol(k, v):
            out["pinned" if is_pinned(k, v, pins) else "config"][k] = v
    fn = _function(tree, inputs_fn)
    for name, c in (inputs_constants(fn) if fn is not None else []):
        out["pinned" if is_pinned(name, c.value, pins) else "inputs"][name] = c.value
    return out


def plan(syms, f, tier=None):
    """The sizes at factor f: {"factor", "config": overrides, "inputs": {symbol: v}}
    (only the symbols that change); tier "widths": only the width symbols
    (WIDTH) change."""
    out = {"factor": f, "config": {}, "inputs": {}, "pinned": syms.get("pinned", {}),
           "symbols": len(syms["config"]) + len(syms["inputs"]), "tier": tier}
    for part in ("config", "inputs"):
        for k, v in syms[part].items():
            if scaled(v, f) != v and (tier != "widths" or WIDTH.search(k)):
                out[part][k] = scaled(v, f)
    keep_ratios(out, syms, f)
    keep_products(out, syms)
    return out


def keep_products(out, syms):
    """A size that is the product of two others at the task's sizes
    (6p's max_seq_len 4096 = pages_per_seq 256 x page_size 16) stays their
    product when the floor stopped one of them (page_size 8, not 1, at
    factor 16): else the lengths would pass what the cache holds (256 keys
    for 128) and a mask of the lengths never bite. Only products with a
    stopped factor are recomputed (4096 = 64 x 64 of two unrelated sizes
    divided alike stays divided), only products of lengths (a width or head
    count times another is a coincidence as often as not: 15p's seq_len
    4096 is its num_heads 16 x head_dim 256), and only when one pair
    explains it."""
    own = {k: v for part in ("config", "inputs") for k, v in syms[part].items()}
    new = {k: out["config"].get(k, out["inputs"].get(k, v)) for k, v in own.items()}
    stopped = {k for k, v in own.items() if new[k] > max(1, v // out["factor"])}
    lengths = [k for k in own if not (WIDTH.search(k) or HEADS.search(k))]
    factor_pairs = [(b, c) for b in lengths for c in lengths if b < c and (b in stopped or c in stopped)]
    for part in ("config", "inputs"):
        for k, v in syms[part].items():
            if k in out["pinned"] or (out["tier"] == "widths" and not WIDTH.search(k)):
                continue
            pairs = [(b, c) for b, c in factor_pairs if k not in (b, c) and own[b] * own[c] == v]
            if len(pairs) == 1:
                b, c = pairs[0]
                if new[b] * new[c] != new[k]:
                    out[part][k] = new[b] * new[c]


def keep_ratios(out, syms, f):
    """Head counts of different values whose ratios are integers (64 query
    heads per 8 KV heads) keep those ratios at factor f: the largest is
    scaled as any size is, the smallest becomes the largest over their
    ratio (at least 1), the others the same multiple of it as before. The
    floor would otherwise stop the KV heads and not the query heads (64/8
    at factor 16: 8 per 8), or leave a count no longer a multiple (40/8 at
    factor 4: 10 per 8)."""
    heads = [(part, k, v) for part in ("config", "inputs") for k, v in syms[part].items() if is_heads(k, v)]
    if len(heads) < 2:  # (a pinned head count is none of them: the others are scaled as sizes)
        return
    base, top = min(v for _, _, v in heads), max(v for _, _, v in heads)
    if base == top or any(v % base for _, _, v in heads):
        return
    new_base = max(1, scaled(top, f) // (top // base))
    new = {k: v // base * new_base for _, k, v in heads}
    # One KV head hides which group a query head reads (a kernel reading
    # KV head h % 8 instead of h // 8 is right with one): a count of 2 or
    # more at the task's sizes stays at 2, the others as they were when
    # they are still multiples of it (64/8 at factor 8: 8 per 2, not 8 per 1).
    if new_base == 1 and base >= 2 and all(n % 2 == 0 for n in new.values() if n != 1):
        new = {k: 2 if n == 1 else n for k, n in new.items()}
    for part, k, v in heads:
        out[part].pop(k, None)
        if new[k] != v:
            out[part][k] = new[k]


def factors(syms, target=TARGET):
    """Factors to try, in order: from the one that brings the largest size to
    about `target` down to 1 (the task's own sizes), then larger ones (only
    reached when the smaller sizes cost too much)."""
    values = list(syms["config"].values()) + list(syms["inputs"].values())
    top = max(values or [1])
    f0 = 1
    while top // (f0 * 2) >= max(target, 1):
        f0 *= 2
    down = [f0 >> i for i in range(f0.bit_length())]
    up, f = [], f0 * 2
    while top // f >= FLOOR:
        up.append(f)
        f *= 2
    return down + up


def scaled_inputs_fn(source, filename, inputs_fn, sizes, namespace):
    """The task's inputs function with its written sizes replaced by `sizes`
    ({symbol: v}), compiled in `namespace` (the reference module's globals)."""
    tree = ast.parse(source, filename=filename)
    fn = _function(tree, inputs_fn)
    for name, c in inputs_constants(fn):
        if name in sizes:
            c.value = sizes[name]
    mod = ast.Module(body=[fn], type_ignores=[])
    ns = dict(namespace)
    exec(compile(mod, filename, "exec"), ns)  # the task's own function, resized
    return ns[inputs_fn]


# ------------------------------------------------------- the search (JAX)

class Attempt:
    """One factor tried: `reason` says why it was refused (None = chosen)."""

    def __init__(self, f, p):
        self.f, self.plan, self.reason, self.inputs_fn = f, p, None, None
        self.flops, self.call_s, self.input_bytes = None, None, None
        self.made = False  # whether its inputs were made (a cost refusal from shapes alone makes none)
        self.parts = None  # the reference run in these equal parts ({axis: parts}: chunked.in_parts), or whole
        self.whole_why = None  # why it ran whole though estimated over the bound (no split checked out)
        self.too_big = False  # refused for its cost: larger sizes are not tried
        self.unscalable = f == 1 and not p["symbols"]  # its own sizes are the only choice
        self.warning = None

    def record(self):
        out = {"factor": self.f, "flops": self.flops, "call_s": self.call_s, "input_bytes": self.input_bytes,
               "inputs_made": self.made}
        if self.plan.get("tier"):
            out["tier"] = self.plan["tier"]
        if self.parts:
            out["chunks"] = {str(p): m for p, m in sorted(self.parts.items())}
        if self.whole_why:
            out["whole"] = self.whole_why
        if self.reason:
            out["refused"] = self.reason
        return out


def _abstract_inputs(jax, task, ref, dtype, fn):
    """(dynamic inputs, statics) of this scale traced abstractly: arrays as
    ShapeDtypeStructs, Python values as they are; nothing is allocated.
    None when the inputs function needs concrete values (group sizes
    computed on arrays) or fails: the inputs are then made to find out."""
    box = {}

    def arrays():
        dyn, statics = make_inputs(task, ref, 0, None, dtype, fn)
        box["dyn"], box["statics"] = dyn, statics
        return [x for x in dyn if hasattr(x, "shape")]
    try:
        shapes = iter(jax.eval_shape(arrays))
    except Exception:
        return None
    return [next(shapes) if hasattr(x, "shape") else x for x in box["dyn"]], box["statics"]


def _abstract_cost(jax, task, ref, dtype, a):
    """Bytes of a's inputs and FLOPs of one reference call, from shapes
    alone, before anything is made (a 3-D convolution's inputs take longer
    to make than its FLOPs take to count). Sets a.input_bytes and a.flops
    when they can be known this way."""
    ab = _abstract_inputs(jax, task, ref, dtype, a.inputs_fn)
    if ab is None:
        return
    dyn, statics = ab
    try:
        a.input_bytes = int(sum(x.size * x.dtype.itemsize for x in dyn if hasattr(x, "shape")))
        a.flops = _flops(jit_static(jax, entry_fn(task, ref, statics), dyn).lower(*dyn))
    except Exception:  # the reference fails on these shapes (or odd dtypes): running it says how
        a.flops = None


def _flops(lowered):
    try:
        ca = lowered.cost_analysis()
    except Exception:  # no cost analysis on this backend: no FLOP budget
        return None
    if isinstance(ca, (list, tuple)):
        ca = ca[0] if ca else {}
    return float((ca or {}).get("flops", 0) or 0) or None


def passes_as(got, want, tol):
    """Whether outputs `got` pass the suite's own check against `want`
    (compare_outputs with the task's tolerance): a kernel returning
    them would be called correct. Float rounding (a mean of normalised
    values is 0 only up to it) is no difference. Scalars are compared as
    one-element arrays, as the frozen files store them."""
    import numpy as np
    one_d = [np.atleast_1d(np.asarray(x)) for x in got], [np.atleast_1d(np.asarray(x)) for x in want]
    return compare_outputs(one_d[0], one_d[1], tol["atol"], tol["rtol"])["ok"]


def _trivial(np, outs, tol):
    """Why the reference's outputs cannot tell a right kernel from a wrong
    one (None when they can): constant means that every non-scalar output
    filled with its own mean would pass the check."""
    floats = [np.asarray(o, dtype=np.float64) for o in outs if np.asarray(o).size]
    if not floats:
        return "the reference returns no values"
    if any(not np.isfinite(o).all() for o in floats):
        return "the reference's output has NaN or Inf"
    big = [o for o in floats if o.size > 1]  # a scalar (a mean loss) is judged by the input change
    if big and not any(o.any() for o in big):
        return ZEROS
    if big and passes_as([np.full_like(o, o.mean()) for o in big], big, tol):
        return CONSTANT
    return None


def _changed_input(jax, np, dyn):
    """dyn with its largest non-constant float input changed, or None: its
    values moved by one place and scaled and shifted (y = roll(x) * 1.5 +
    std(x) / 2). Moved alone, a reduction over the whole input (a global
    average pool, a min over normalised features) changes only by rounding;
    scaled alone, a norm's output does not change at all. A computation that
    changes under neither ignores the input as far as the check can tell."""
    jnp = jax.numpy
    order = sorted((i for i, x in enumerate(dyn) if hasattr(x, "dtype") and
                    jnp.issubdtype(x.dtype, jnp.floating) and x.size > 1),
                   key=lambda i: -dyn[i].size)
    for i in order:
        x = dyn[i]
        moved = jnp.roll(x.reshape(-1), 1).reshape(x.shape)
        if bool(jnp.any(moved != x)):
            y = (moved.astype(jnp.float32) * 1.5 + jnp.std(x.astype(jnp.float32)) / 2).astype(x.dtype)
            return dyn[:i] + [y] + dyn[i + 1:]
    return None


class _Refused(Exception):
    pass


def _in_memory(jax, a, raw, dyn, compiled, split_why):
    """The reference as it runs at a's scale: `raw` jitted whole, or in
    equal parts (chunked.in_parts, a.parts set) when whole it would hold
    more than a harness process may (chunked.bound: 1p's flash attention at
    the widths tier needs 4.5 GB whole), with the parts checked against
    the unsplit reference by `split_why` (chunked.base_check on the test
    scale's suite). When there is no such check or no split, whole if
    XLA's own count fits the memory limit (chunked.fits_whole: a.whole_why
    says why not in parts), else None, a refused (too_big). Its float32
    evaluation (freeze.py) is counted too."""
    from .freeze import _narrow
    mem = int(os.environ.get("MK_PALLAS_MEM_MB") or 0) << 20
    limit = chunked.bound(mem)
    narrow = any(_narrow(x) for x in dyn)

    def counted(fn):  # XLA's count of fn's run on the inputs, and on them widened (at most twice as much)
        got = chunked.xla_bytes(compiled if fn is raw else jit_static(jax, fn, dyn).lower(*dyn).compile())
        if narrow and got and chunked.estimate(2 * got) > limit:  # shapes alone: nothing widened is made
            wide = [jax.ShapeDtypeStruct(x.shape, "float32") if _narrow(x) else x for x in dyn]
            got = max(got, chunked.xla_bytes(jit_static(jax, fn, wide).lower(*wide).compile()) or 0)
        return got
    try:
        need = counted(raw)
    except Exception:  # the reference fails on these inputs: running it says how
        need = None
    if not need or chunked.estimate(need) <= limit:
        return _WithStatics(compiled, static_positions(dyn))
    over = ("the reference needs %.3g MB at these sizes (XLA counts %.3g MB; chunked.estimate), over the %.3g MB "
            "a harness process may hold" % (chunked.estimate(need) / 1e6, need / 1e6, limit / 1e6))

    def refuse(why):
        raise _Refused(over + "; " + why)
    try:
        if split_why is None:
            refuse("not run in parts without the test scale's suite to check them on")
        PHASE["now"] = "checking the reference split in parts on the test scale's case"
        shapes = _leaves(jax.eval_shape(jit_static(jax, raw, dyn), *dyn))
        sizes = chunked.axis_sizes([x.shape for x in dyn if hasattr(x, "shape")], [o.shape for o in shapes])
        parts, _ = chunked.plan(sizes, need, (limit - chunked.OVERHEAD_BYTES) / chunked.XLA_UNDERCOUNT, split_why,
                                lambda p: (counted(chunked.in_parts(jax, raw, p)), None), refuse)
    except _Refused as e:
        if chunked.fits_whole(need, mem):  # XLA's own count fits the limit: whole, the limit's watch the judge
            a.whole_why = str(e)
            return _WithStatics(compiled, static_positions(dyn))
        a.reason, a.too_big = str(e) + ", and XLA's own count is over 4/5 of the memory limit", True
        return None
    a.parts = parts
    return jit_static(jax, chunked.in_parts(jax, raw, parts), dyn)


def _run_reference(jax, task, ref, dtype, a, budget, split_why=None):
    """Make the inputs and run the reference at a's scale (in parts when it
    needs more memory than a process may hold: _in_memory); sets a.reason
    when this scale is refused. Returns the outputs."""
    np = __import__("numpy")
    dyn, statics = make_inputs(task, ref, 0, None, dtype, a.inputs_fn)
    a.made = True
    a.input_bytes = sum(int(x.nbytes) for x in dyn if hasattr(x, "nbytes"))
    raw = entry_fn(task, ref, statics)
    lowered = jit_static(jax, raw, dyn).lower(*dyn)
    if a.flops is None:
        a.flops = _flops(lowered)
    if _over_budget(a, budget):
        return None
    try:
        compiled = lowered.compile()
    except Exception:  # the reference fails to compile here: running it says how
        compiled = None
    fn = _in_memory(jax, a, raw, dyn, compiled, split_why) if compiled is not None else jit_static(jax, raw, dyn)
    if fn is None:
        return None
    del compiled
    t0 = _clock()
    outs = [_to_numpy(o) for o in _leaves(fn(*dyn))]
    a.call_s = _clock() - t0
    tol = task["tolerance"]
    a.reason = _trivial(np, outs, tol)
    changed = None if a.reason else _changed_input(jax, np, dyn)
    if changed is not None:
        outs2 = [_to_numpy(o) for o in _leaves(fn(*changed))]
        if passes_as(outs2, outs, tol):  # the same within the tolerance: a kernel ignoring it would pass
            a.reason = INDEPENDENT
    if a.reason and a.unscalable:  # its own sizes are all there is: frozen, with a warning
        a.warning, a.reason = a.reason + ": these tests cannot tell every wrong kernel from a right one", None
    return outs


def _over_budget(a, budget):
    """Refuses a (too_big) when its FLOPs a call pass the budget."""
    budget = FULL_FLOP_BUDGET if a.unscalable else budget
    if a.flops and a.flops > budget:
        a.reason, a.too_big = "%.3g FLOP a call, over the budget of %.3g" % (a.flops, budget), True
    return a.too_big


def try_factor(jax, task, ref, dtype, syms, f, max_input_bytes, budget=FLOP_BUDGET, tier=None, split_why=None):
    """An Attempt at factor f (its reason set when refused); the cost is
    checked from shapes before any input is made. `split_why`: the check
    of a reference run in parts (_in_memory), when there is one."""
    p = plan(syms, f, tier)
    a = Attempt(f, p)
    PHASE["now"] = "running the reference at scale factor %d%s" % (f, " (%s only)" % tier if tier else "")
    if f > 1 and not p["config"] and not p["inputs"]:
        a.reason = "nothing to scale"
        return a
    try:
        if p["inputs"]:
            a.inputs_fn = scaled_inputs_fn(task["reference"], task["reference_file"], task["inputs_fn"],
                                           p["inputs"], vars(ref))
        with config_scope(ref, p["config"]):
            _abstract_cost(jax, task, ref, dtype, a)
            limit = max_input_bytes if a.unscalable else SCALED_INPUT_BYTES
            if a.input_bytes and limit and a.input_bytes > limit:
                a.too_big = True
                a.reason = "inputs of %.3g MB, over the limit of %.3g MB" % (a.input_bytes / 1e6, limit / 1e6)
                return a
            if _over_budget(a, budget):
                return a
            _run_reference(jax, task, ref, dtype, a, budget, split_why)
    except HarnessError:
        raise
    except Exception as e:  # the reference fails at this scale: another is tried
        a.reason = "the reference fails: %s: %s" % (type(e).__name__, str(e).splitlines()[0][:300] if str(e) else "")
    return a


def _hopeless(tried):
    """The reference failed the same way at the last three factors: scale
    is not what it needs."""
    last = [a.reason for a in tried[-3:]]
    return len(last) == 3 and last[0].startswith("the reference fails") and len(set(last)) == 1


def _task_property(tried):
    """The output was constant or ignored the largest input at the last
    three factors: a property of the task (26k's norm over 1x1 planes), not
    of its sizes. Two are not enough: 40k's 512 groups hold one feature at
    factor 16 and two at factor 8, and at either the minimum over the
    normalised features is the same whatever the input; at 4 it is not."""
    return len(tried) >= 3 and all(a.reason in TASK_PROPERTIES for a in tried[-3:])


def _search(jax, task, ref, dtype, syms, order, ctx, tier=None):
    """The first Attempt accepted among the factors `order` (None when none
    is); every attempt is appended to ctx["tried"]."""
    mine, floor = [], 0
    budget = START_FLOPS if tier is None else FLOP_BUDGET
    for f in order:
        if f <= floor:
            continue
        if _hopeless(mine) or _task_property(mine) or _clock() > ctx["end"]:
            break
        a = try_factor(jax, task, ref, dtype, syms, f, ctx["max_input_bytes"], budget, tier)
        if a.too_big:
            floor = f
        elif a.reason:
            budget = FLOP_BUDGET  # small sizes ran but cannot test: larger ones may cost more
        if a.reason == "nothing to scale":
            continue
        mine.append(a)
        ctx["tried"].append(a)
        if ctx["log"]:
            ctx["log"]("test scale: factor %d%s: %s" % (f, " (%s only)" % tier if tier else "", a.reason or "ok"))
        if not a.reason:
            return a
    return None


def _widths_differ(syms):
    """Whether scaling the widths alone is another plan than scaling all."""
    names = list(syms["config"]) + list(syms["inputs"])
    return any(WIDTH.search(k) for k in names) and not all(WIDTH.search(k) for k in names)


def choose(jax, task, ref, dtype, target, max_input_bytes=None, log=None):
    """The chosen Attempt and the list of all attempts; raises
    HarnessError('cannot_freeze') naming why when no factor works.
    Every size is scaled by the factor first; when the reference fails at
    every factor so tried, the widths alone are (WIDTH)."""
    syms = symbols(task["reference"], task["inputs_fn"], task.get("config"), task["entry"])
    if not target:  # the task's own sizes (a device): nothing to choose, no budget
        return Attempt(1, plan(syms, 1)), []
    ctx = {"tried": [], "end": _clock() + SEARCH_S, "max_input_bytes": max_input_bytes, "log": log}
    order = factors(syms, target)
    a = _search(jax, task, ref, dtype, syms, order, ctx)
    failed = any((t.reason or "").startswith("the reference fails") for t in ctx["tried"])
    if a is None and failed and _widths_differ(syms):
        a = _search(jax, task, ref, dtype, syms, [f for f in order if f > 1], ctx, tier="widths")
    if a is not None:
        return a, ctx["tried"]
    tried = ctx["tried"]
    # at every size tried: a property of the task, not of its test scale; the
    # largest sizes tried are used (40k's groups hold one feature at factor 16,
    # where its output is its bias, and four at 4)
    ran = sorted((a for a in tried if a.reason in TASK_PROPERTIES), key=lambda a: a.f)
    if ran:
        ran[0].warning, ran[0].reason = ran[0].reason + " at any test scale tried", None
        return ran[0], tried
    why = "; ".join("factor %d%s: %s" % (a.f, " (%s only)" % a.plan["tier"] if a.plan.get("tier") else "", a.reason)
                    for a in tried) or "no sizes to try"
    raise HarnessError("cannot_freeze", "%s cannot be frozen at any test scale (%s)" % (task["name"], why))
