"""Task loading, without JAX: which format a task directory holds (JAXBench
`baseline.py`, MaxKernel `reference.py` + `kernel_task.yaml`, mkengine
`task.lua` + `reference.py`) and its description, tolerance and entry. The
files are parsed (ast, PyYAML), never run."""

import ast
import os
import re
import sys

from .errors import HarnessError


def _read(path):
    with open(path, "r", encoding="utf-8") as f:
        return f.read()


def _module_info(source, filename):
    """Top-level facts of a Python module: literal assignments, functions."""
    try:
        tree = ast.parse(source, filename=filename)
    except SyntaxError as e:
        raise HarnessError("bad_task", "%s: syntax error line %s: %s" % (filename, e.lineno, e.msg))
    info = {"doc": ast.get_docstring(tree) or "", "literals": {}, "functions": {}}
    lines = source.splitlines()
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            try:
                info["literals"][node.targets[0].id] = ast.literal_eval(node.value)
            except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
                pass
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            a = node.args
            params = [p.arg for p in a.posonlyargs + a.args]
            header = lines[node.lineno - 1].strip() if node.lineno - 1 < len(lines) else "def %s(...):" % node.name
            # A signature may span lines: keep up to the closing "):".
            i = node.lineno
            while not header.rstrip().endswith(":") and i < len(lines) and i < node.lineno + 10:
                header += " " + lines[i].strip()
                i += 1
            info["functions"][node.name] = {
                "params": params,
                "vararg": a.vararg.arg if a.vararg else None,
                "kwonly": [p.arg for p in a.kwonlyargs],
                "signature": header,
                "doc": ast.get_docstring(node) or "",
            }
    return info


def parse_yaml(text):
    """Parse kernel_task.yaml with PyYAML (scripts/packages/pallas.pip pins
    it; a MaxKernel task cannot be read without it)."""
    try:
        import yaml  # lazy: only MaxKernel task files need it
    except ImportError:
        raise HarnessError("no_yaml", "reading kernel_task.yaml needs PyYAML, which %s cannot import: run "
                           "scripts/setup.sh (it installs the pinned PyYAML into .venv/) or pip install PyYAML"
                           % sys.executable)
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise HarnessError("bad_task", "kernel_task.yaml is not valid YAML: %s" % e)
    if not isinstance(data, dict):
        raise HarnessError("bad_task", "kernel_task.yaml: top level is not a mapping")
    return data


def detect_format(task_dir):
    """Which task format a directory holds: 'maxkernel', 'jaxbench', 'mk' or None."""
    has = lambda n: os.path.isfile(os.path.join(task_dir, n))
    if has("kernel_task.yaml") and has("reference.py"):
        return "maxkernel"
    if has("baseline.py"):
        return "jaxbench"
    if has("task.lua") and has("reference.py"):
        return "mk"
    return None


def _tolerance_value(v, index, name):
    if v is None:
        return None
    if isinstance(v, (list, tuple)):
        if not v:
            return None
        return float(v[min(index, len(v) - 1)])
    try:
        return float(v)
    except (TypeError, ValueError):
        raise HarnessError("bad_task", "%s is not a number: %r" % (name, v))


def load_task(task_dir, overrides=None):
    """Describe the task in `task_dir` as a dict (see docs/targets/pallas.md)."""
    overrides = overrides or {}
    task_dir = os.path.abspath(task_dir)
    if not os.path.isdir(task_dir):
        raise HarnessError("bad_task", "not a directory: %s" % task_dir)
    fmt = detect_format(task_dir)
    if fmt is None:
        raise HarnessError("bad_task", "%s: no baseline.py, reference.py + kernel_task.yaml, "
                           "or task.lua + reference.py" % task_dir)
    name = os.path.basename(task_dir.rstrip("/"))
    ref_file = "baseline.py" if fmt == "jaxbench" else "reference.py"
    source = _read(os.path.join(task_dir, ref_file))
    info = _module_info(source, ref_file)
    config = info["literals"].get("CONFIG") if isinstance(info["literals"].get("CONFIG"), dict) else {}
    task = {
        "name": name, "format": fmt, "dir": task_dir, "reference_file": ref_file,
        "reference": source, "candidate_file": "kernel.py", "config": config,
        "test_configs": info["literals"].get("TEST_CONFIGS") or [],
        "has_get_flops": "get_flops" in info["functions"],
    }
    cfg_index = int(overrides.get("config_index") or 0)
    if fmt == "maxkernel":
        meta = parse_yaml(_read(os.path.join(task_dir, "kernel_task.yaml")))
        task["name"] = str(meta.get("task_id") or name)
        task["description"] = str(meta.get("description") or info["doc"] or "")
        task["input_gen_code"] = meta.get("input_gen_code") or ""
        atol = _tolerance_value(meta.get("atol"), cfg_index, "atol")
        rtol = _tolerance_value(meta.get("rtol"), cfg_index, "rtol")
        task["tolerance_lists"] = {k: meta[k] for k in ("atol", "rtol") if isinstance(meta.get(k), list)}
        entry, inputs_fn = "computation", "get_inputs"
    else:
        task["name"] = name  # JAXBench ids are directory names; CONFIG['name'] stays in config
        task["description"] = info["doc"] or ""
        atol = _tolerance_value(config.get("atol"), cfg_index, "atol")
        rtol = _tolerance_value(config.get("rtol"), cfg_index, "rtol")
        entry, inputs_fn = "workload", "create_inputs"
        if fmt == "mk":
            # task.lua is Lua (the engine reads it); its tolerance and
            # description are picked out here so the harness alone agrees.
            lua = _read(os.path.join(task_dir, "task.lua"))
            num = r"([0-9][0-9.]*(?:[eE][-+]?[0-9]+)?)"
            m = re.search(r"\batol\s*=\s*" + num, lua)
            atol = float(m.group(1)) if m else atol
            m = re.search(r"\brtol\s*=\s*" + num, lua)
            rtol = float(m.group(1)) if m else rtol
            m = re.search(r"\bname\s*=\s*[\"']([\w.-]+)[\"']", lua)
            task["name"] = m.group(1) if m else name
    if overrides.get("name"):
        task["name"] = overrides["name"]
    for fn in (entry, inputs_fn):
        if fn not in info["functions"]:
            raise HarnessError("bad_task", "%s: no function %s()" % (ref_file, fn))
    atol = float(overrides["atol"]) if overrides.get("atol") is not None else atol
    rtol = float(overrides["rtol"]) if overrides.get("rtol") is not None else rtol
    # The published protocol's default: atol = rtol = 1e-2.
    task["tolerance"] = {"atol": 1e-2 if atol is None else atol, "rtol": 1e-2 if rtol is None else rtol}
    task["entry"] = entry
    task["inputs_fn"] = inputs_fn
    task["signature"] = info["functions"][entry]["signature"]
    task["entry_params"] = info["functions"][entry]["params"]
    if not task["description"]:
        task["description"] = "Implement %s with Pallas kernels." % task["signature"]
    return task


def _overrides(a):
    return {"atol": a.atol, "rtol": a.rtol, "name": a.name, "config_index": a.config_index}
