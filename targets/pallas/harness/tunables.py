"""A candidate's tunables, without JAX: its `# mk:tune NAME = [v, ...]`
lines (the C target's `# mk:tune NAME v v v` form too)."""

import ast
import re

from .errors import HarnessError


_TUNE_RE = re.compile(r"^\s*(?:#|//)\s*mk:tune\s+([A-Za-z_]\w*)\s*(.*)$")


def _literal(s):
    try:
        return ast.literal_eval(s)
    except (ValueError, SyntaxError):
        return s


def parse_tunables(source):
    """Tunables declared in a candidate, in order of declaration:
    `# mk:tune block_m = [128, 256]` (Python form) or
    `# mk:tune BLOCK 32 64 128` (the C form, accepted too).
    Returns a list of {"name", "values"}; malformed lines raise HarnessError."""
    out, seen = [], set()
    for lineno, line in enumerate(source.splitlines(), 1):
        m = _TUNE_RE.match(line)
        if not m:
            continue
        name, rest = m.group(1), m.group(2).strip()
        if rest.startswith("="):
            try:
                values = ast.literal_eval(rest[1:].strip())
            except (ValueError, SyntaxError):
                raise HarnessError("bad_tunable", "line %d: values of %s are not a Python literal list: %s"
                                   % (lineno, name, rest[1:].strip()))
            if not isinstance(values, (list, tuple)):
                values = [values]
            values = list(values)
        else:
            values = [_literal(v) for v in rest.replace(",", " ").split()]
        if not values:
            raise HarnessError("bad_tunable", "line %d: %s has no values" % (lineno, name))
        if name in seen:
            raise HarnessError("bad_tunable", "line %d: %s declared twice" % (lineno, name))
        seen.add(name)
        out.append({"name": name, "values": values})
    return out
