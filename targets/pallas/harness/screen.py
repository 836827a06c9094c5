"""The static screen of candidates, without JAX: the imports, calls, names
and attributes a candidate may not use (files, processes, introspection,
the task's reference, patching JAX, timers or the harness itself), looked
for in the code that can run when the harness imports it and calls its
entry."""

import ast


ALLOWED_IMPORTS = ("jax", "jaxlib", "numpy", "functools", "math", "typing", "dataclasses",
                   "itertools", "operator", "collections", "enum", "abc", "__future__", "ml_dtypes")
FORBIDDEN_CALLS = ("open", "exec", "eval", "compile", "__import__", "globals", "locals", "vars",
                   "setattr", "delattr", "breakpoint", "input")
# Modules a task's own file imports at module level for its benchmark()
# helper (MaxKernel's GEMM reference: `import time`, `import json`). Importing
# them does nothing; using them in code that can run is refused.
INERT_IMPORTS = ("time", "json")
FORBIDDEN_NAMES = ("mk_reference", "workload_reference", "__builtins__", "__loader__", "__spec__",
                   "attrgetter", "methodcaller", "_getframe")  # the last three: see FORBIDDEN_ATTRS
# Attributes (and getattr names) that reach the interpreter through an
# allowed module: `typing.sys.modules` holds the harness's modules,
# `typing.sys._getframe(1).f_back` its frames (the task, the reference).
FORBIDDEN_ATTRS = ("sys", "_sys", "os", "_os", "modules", "_getframe", "f_back", "f_locals", "f_globals",
                   "f_builtins", "tb_frame", "gi_frame", "cr_frame", "ag_frame", "builtins", "importlib",
                   "subprocess", "attrgetter", "methodcaller", "_REAL")


ENTRIES = ("workload", "computation")  # what the harness calls in a candidate


def _is_main_guard(node):
    """`if __name__ == "__main__":` (either operand order)."""
    t = node.test if isinstance(node, ast.If) else None
    if not (isinstance(t, ast.Compare) and len(t.ops) == 1 and isinstance(t.ops[0], ast.Eq)):
        return False
    sides = [t.left, t.comparators[0]]
    return (any(isinstance(x, ast.Name) and x.id == "__name__" for x in sides)
            and any(isinstance(x, ast.Constant) and x.value == "__main__" for x in sides))


def _name_rebound(tree):
    """Whether the candidate binds __name__ itself (then a __main__ block
    might run on import and is screened like the rest)."""
    for n in ast.walk(tree):
        if isinstance(n, ast.Name) and n.id == "__name__" and not isinstance(n.ctx, ast.Load):
            return True
        if isinstance(n, ast.alias) and n.asname == "__name__":
            return True
        if isinstance(n, (ast.Global, ast.Nonlocal)) and "__name__" in n.names:
            return True
    return False


def _names_in(nodes):
    """Every identifier and string constant in the subtrees (a function may
    be reached by name, or by a string given to getattr)."""
    out = set()
    for root in nodes:
        for n in ast.walk(root):
            if isinstance(n, ast.Name):
                out.add(n.id)
            elif isinstance(n, ast.Constant) and isinstance(n.value, str):
                out.add(n.value)
    return out


def _def_header(fn):
    """The parts of a def that run when the module is imported: decorators,
    default values, annotations."""
    a = fn.args
    parts = list(fn.decorator_list) + list(a.defaults) + [d for d in a.kw_defaults if d is not None]
    parts += [x.annotation for x in a.posonlyargs + a.args + a.kwonlyargs + [a.vararg, a.kwarg]
              if x is not None and x.annotation is not None]
    return parts + ([fn.returns] if fn.returns is not None else [])


def screened_nodes(tree):
    """The parts of a candidate that can run when the harness imports it and
    calls its entry: module-level code (a `__main__` block excepted: the
    module is imported under another name), and the bodies of the module's
    functions reachable from that code or from the entry. Helpers nothing
    reaches (a task file's benchmark(), get_flops()) never run: their
    imports and calls are not the candidate's."""
    skip_main = not _name_rebound(tree)
    defs, top = {}, []
    for st in tree.body:
        if isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef)):
            defs.setdefault(st.name, []).append(st)
            top += _def_header(st)
        elif skip_main and _is_main_guard(st):
            top += [st.test] + st.orelse
        else:
            top.append(st)
    reached, todo = set(), list(_names_in(top) | set(ENTRIES))
    while todo:
        name = todo.pop()
        if name in reached:
            continue
        reached.add(name)
        for fn in defs.get(name, []):
            todo += list(_names_in(fn.body) - reached)
    bodies = [st for name in reached for fn in defs.get(name, []) for st in fn.body]
    return [n for root in top + bodies for n in ast.walk(root)]


def _assign_violations(node, imported):
    targets = node.targets if isinstance(node, (ast.Assign, ast.Delete)) else [node.target]
    bad = []
    for t in targets:
        base = t
        while isinstance(base, (ast.Attribute, ast.Subscript)):
            base = base.value
        if t is not base and isinstance(base, ast.Name) and base.id in imported:
            bad.append("line %d: assigning into imported module %s is not allowed (no patching "
                       "of JAX, timers or the harness)" % (node.lineno, base.id))
    return bad


def _imported_modules(node):
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    if isinstance(node, ast.ImportFrom):
        return [node.module or ""] if node.level == 0 else ["." * node.level + (node.module or "")]
    return []


def _node_violations(node, imported):
    bad = []
    if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Delete)):
        bad += _assign_violations(node, imported)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "getattr":
        name = node.args[1] if len(node.args) > 1 else None
        if not (isinstance(name, ast.Constant) and isinstance(name.value, str)
                and not name.value.startswith("__") and name.value not in FORBIDDEN_ATTRS):
            bad.append("line %d: getattr() needs a constant, non-dunder attribute name" % node.lineno)
    for m in _imported_modules(node):
        if m.split(".", 1)[0] not in ALLOWED_IMPORTS + INERT_IMPORTS:
            bad.append("line %d: import of %s is not allowed (allowed: %s)"
                       % (node.lineno, m, ", ".join(ALLOWED_IMPORTS)))
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in FORBIDDEN_CALLS:
        bad.append("line %d: call of %s() is not allowed" % (node.lineno, node.func.id))
    if isinstance(node, ast.Name) and node.id in FORBIDDEN_NAMES:
        bad.append("line %d: use of %s is not allowed" % (node.lineno, node.id))
    if isinstance(node, ast.Attribute) and node.attr in FORBIDDEN_ATTRS:
        bad.append("line %d: access to .%s is not allowed (the interpreter, the harness and its frames "
                   "are not the candidate's)" % (node.lineno, node.attr))
    if isinstance(node, ast.Attribute) and node.attr in ("__globals__", "__code__", "__subclasses__",
                                                          "__builtins__", "__dict__"):
        bad.append("line %d: access to .%s is not allowed" % (node.lineno, node.attr))
    return bad


def _inert_uses(nodes):
    """Uses of names bound by imports of INERT_IMPORTS (allowed imported,
    never used)."""
    bound = {}
    for node in nodes:
        if isinstance(node, (ast.Import, ast.ImportFrom)) and \
                any(m.split(".", 1)[0] in INERT_IMPORTS for m in _imported_modules(node)):
            for a in node.names:
                bound[(a.asname or a.name).split(".", 1)[0]] = _imported_modules(node)[0]
    return ["line %d: use of %s (module %s) is not allowed: it may be imported, as a task's file does for its "
            "benchmark helper, but not used" % (n.lineno, n.id, bound[n.id])
            for n in nodes if isinstance(n, ast.Name) and n.id in bound]


def scan_candidate(source, filename="kernel.py"):
    """Rule violations of a candidate, as messages (empty list = clean).
    Candidates may import JAX, numpy and a few pure stdlib modules; file,
    process and introspection access (open, os, subprocess, eval, getattr...)
    and references to the task's reference module are refused: they are the
    ways to read the expected outputs, call the reference, or patch timers.
    Only code that can run is screened (screened_nodes): a task's own file,
    with its benchmark() helper and __main__ block, is a valid candidate."""
    try:
        tree = ast.parse(source, filename=filename)
    except SyntaxError:
        return []  # reported as a compile error by the import
    nodes = screened_nodes(tree)
    imported = set()
    for node in nodes:
        if isinstance(node, ast.Import):
            imported.update((a.asname or a.name).split(".", 1)[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            imported.update(a.asname or a.name for a in node.names)
    bad = _inert_uses(nodes)
    for node in nodes:
        bad += _node_violations(node, imported)
    return sorted(set(bad), key=lambda m: (int(m.split(":")[0].split()[1]), m))
