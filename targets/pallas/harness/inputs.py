"""A case's call: the task's reference module, the inputs its inputs
function makes (for a seed, under a case's CONFIG, in a dtype) or those
frozen for the case, and the entry bound to its static arguments."""

import os

from .errors import HarnessError
from .suite import read_case
from .arrays import load_arrays
from .jaxcall import _import_file, _jax


def _resolve_dtype(name):
    if not name:
        return None
    import jax.numpy as jnp
    try:
        return getattr(jnp, name)
    except AttributeError:
        raise HarnessError("bad_task", "unknown dtype %s" % name)


class _SeededKeys:
    """Derive the inputs of seed s from a task whose create_inputs uses a
    fixed jax.random key: while active, key(k)/PRNGKey(k) return
    fold_in(original, s). Seed 0 is the task's own inputs, untouched."""

    def __init__(self, jax, seed):
        self.jax, self.seed, self.saved = jax, seed, None

    def __enter__(self):
        if not self.seed:
            return self
        jr = self.jax.random
        self.saved = (jr.key, jr.PRNGKey)
        ok, opk = self.saved
        s = int(self.seed)
        jr.key = lambda *a, **k: jr.fold_in(ok(*a, **k), s)
        jr.PRNGKey = lambda *a, **k: jr.fold_in(opk(*a, **k), s)
        return self

    def __exit__(self, *exc):
        if self.saved:
            self.jax.random.key, self.jax.random.PRNGKey = self.saved
        return False


def reference_module(task):
    return _import_file(os.path.join(task["dir"], task["reference_file"]), "mk_reference")


class config_scope:
    """`mod.CONFIG` updated with `config` while the block runs, then restored:
    a case's sizes hold while its inputs are made and while the reference
    or a candidate that reads CONFIG (a mask of CONFIG['seq_len']) traces."""

    def __init__(self, mod, config, strict=True):
        self.cfg = getattr(mod, "CONFIG", None) if config else None
        if not isinstance(self.cfg, dict):
            if config and strict:
                raise HarnessError("bad_task", "the case's sizes need a CONFIG dict in %s" % mod.__name__)
            self.cfg = None  # a candidate without CONFIG reads its sizes from its inputs
        self.config, self.saved = config, None

    def __enter__(self):
        if self.cfg is not None:
            self.saved = dict(self.cfg)
            self.cfg.update(self.config)
        return self

    def __exit__(self, *exc):
        if self.saved is not None:
            self.cfg.clear()
            self.cfg.update(self.saved)
        return False


def make_inputs(task, ref, seed=0, config=None, dtype=None, inputs_fn=None):
    """(dynamic inputs list, static args list) for one case; `inputs_fn`
    replaces the task's own (a resized copy, see scaling.py)."""
    import inspect
    jax = _jax()
    fn = inputs_fn or getattr(ref, task["inputs_fn"])
    kwargs = {}
    params = inspect.signature(fn).parameters
    if dtype is not None and "dtype" in params:
        kwargs["dtype"] = dtype
    with config_scope(ref, config):
        if "seed" in params:
            kwargs["seed"] = seed
            out = fn(**kwargs)
        else:
            with _SeededKeys(jax, seed):
                out = fn(**kwargs)
    if task["format"] == "maxkernel":
        return _configuration(task, out)
    if not isinstance(out, (tuple, list)):
        out = (out,)
    return list(out), []


def _pair(x):
    return isinstance(x, (tuple, list)) and len(x) == 2 and all(isinstance(y, (tuple, list)) for y in x)


def configurations(out):
    """The (dynamic, static) configurations a MaxKernel get_inputs returned:
    one for `([dynamic], [static])`, one each for a list of such pairs
    (MaxKernel's multi-configuration form: decode and prefill shapes, odd
    lengths, each checked with its own atol/rtol entry); None for neither.
    A single pair's first item is the list of dynamic arrays, whose items
    are arrays: a pair of pairs is a list of two configurations."""
    if isinstance(out, (tuple, list)) and out and all(_pair(x) for x in out):
        return [(list(d), list(st)) for d, st in out]
    if _pair(out):
        return [(list(out[0]), list(out[1]))]
    return None


def _configuration(task, out):
    """Configuration task["configuration"] (default 0) of get_inputs' `out`;
    how many there are is noted in task["configurations"] (the freeze
    freezes each)."""
    configs = configurations(out)
    if configs is None:
        raise HarnessError("bad_task", "get_inputs must return ([dynamic], [static]) or a list of such pairs "
                           "(one per input configuration)")
    task["configurations"] = len(configs)
    k = task.get("configuration") or 0
    if k >= len(configs):
        raise HarnessError("bad_task", "get_inputs returned %d configurations, not %d" % (len(configs), k + 1))
    return configs[k]


def configuration_task(task, k):
    """The task as configuration k of a multi-configuration task sees it:
    its inputs are get_inputs' k-th pair, its tolerance the k-th entries of
    the task's atol/rtol lists (the last reused when a list is shorter;
    a task with one tolerance keeps it)."""
    t = dict(task, configuration=k)
    lists = task.get("tolerance_lists") or {}
    tol = dict(task["tolerance"])
    for name in ("atol", "rtol"):
        vals = lists.get(name)
        if vals:
            tol[name] = float(vals[min(k, len(vals) - 1)])
    t["tolerance"] = tol
    return t


def entry_fn(task, mod, statics):
    """A jit-able function of the dynamic inputs named mk_candidate/mk_reference."""
    f = getattr(mod, task["entry"], None)
    if not callable(f):
        return None

    def bind(*dyn):
        return f(*dyn, *statics)
    bind.__name__ = "mk_" + ("reference" if mod.__name__ == "mk_reference" else "candidate")
    return bind


def frozen_case_inputs(tests_dir, cid):
    jax = _jax()
    meta = read_case(tests_dir, cid)
    arrays = load_arrays(os.path.join(tests_dir, "inputs", cid + ".npz"), meta["inputs"])
    args, it = [], iter(arrays)
    for kind in meta["kinds"]:
        # device_put, not jnp.asarray: the same array and dtype, without a
        # conversion compiled for every new shape (20 ms each on the CPU)
        args.append(jax.device_put(next(it)) if kind == "array" else meta["scalars"].pop(0))
    return args, meta.get("statics", [])
