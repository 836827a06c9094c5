#!/usr/bin/env python3
"""Print the longest functions in engine/, lua/ and targets/, and fail when
any is over the limit (80 lines unless --limit says otherwise).

How a function is measured, from its first line to its last:
  C       a brace matcher over the text with comments, strings and character
          literals blanked: a `{` at file depth 0 that follows `)` opens a
          function, whose first line is the line of its name;
  Lua     `luac5.4 -p -l -l` prints each function's line range (the main
          chunk is not a function);
  Python  `ast`: def/async def from the first decorator to end_lineno.

The allow-list (scripts/fnlen-allow.txt; `path:name  reason`, one a line)
is for a function that is long for a reason stated there. It hides nothing:
an allowed function is still printed, marked "allowed", and an entry that no
longer matches a function over the limit is an error (a stale excuse).

Usage: scripts/fnlen.py [--limit N] [--top N] [--report] [--files] [PATH...]
  --report  print only, exit 0 (the test command's mode until every long
            function is split)
  --files   measure the PATHs as given (files, tracked or not), not the
            files git tracks below them
Exit: 0 none over the limit (or --report), 1 some over it, 2 usage error.
"""
import argparse
import ast
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_DIRS = ["engine", "lua", "targets"]
ALLOW_FILE = os.path.join(ROOT, "scripts", "fnlen-allow.txt")
C_EXT = (".c", ".h")
C_KEYWORDS = {"if", "for", "while", "switch", "return", "sizeof", "do", "else"}


def usage_error(msg):
    print("fnlen: " + msg, file=sys.stderr)
    sys.exit(2)


def blank_c(text):
    """The text with comments, string and char literals replaced by spaces
    (newlines kept, so line numbers stay)."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            j = min(j + 1, n)
            out.append(c + re.sub(r"[^\n]", " ", text[i + 1:j - 1]) + c)
            i = j
        elif c == "#" and (i == 0 or text[i - 1] == "\n"):
            # a preprocessor line (with its continuations) holds no braces
            # that count
            j = i
            while True:
                k = text.find("\n", j)
                if k < 0:
                    k = n
                    break
                if text[k - 1] != "\\":
                    break
                j = k + 1
            out.append(re.sub(r"[^\n]", " ", text[i:k]))
            i = k
        else:
            out.append(c)
            i += 1
    return "".join(out)


def c_function_name(head):
    """The name of the function whose parameter list ends `head` (text
    before the opening brace), or None when the brace opens no function."""
    head = head.rstrip()
    if not head.endswith(")"):
        return None
    depth = 0
    for k in range(len(head) - 1, -1, -1):
        if head[k] == ")":
            depth += 1
        elif head[k] == "(":
            depth -= 1
            if depth == 0:
                m = re.search(r"([A-Za-z_]\w*)\s*$", head[:k])
                if not m or m.group(1) in C_KEYWORDS:
                    return None
                return m.group(1), m.start(1)
    return None


def c_functions(path):
    with open(path, encoding="utf-8", errors="replace") as f:
        text = blank_c(f.read())
    found = []
    depth, last_top = 0, 0  # last_top: where the current top-level item began
    for i, c in enumerate(text):
        if c == "{":
            if depth == 0:
                named = c_function_name(text[last_top:i])
                start = (named, last_top + named[1]) if named else None
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                if start:
                    first = text.count("\n", 0, start[1]) + 1
                    last = text.count("\n", 0, i) + 1
                    found.append((start[0][0], first, last))
                last_top = i + 1
        elif c == ";" and depth == 0:
            last_top = i + 1
    return found


LUA_RANGE = re.compile(r"^function <[^:]*:(\d+),(\d+)>", re.M)
LUA_NAME = [
    re.compile(r"function\s+([\w.:]+)\s*\("),
    re.compile(r"([\w.:\[\]\"']+)\s*=\s*function\s*\("),
]


def lua_functions(path):
    run = subprocess.run(["luac5.4", "-p", "-l", "-l", path], capture_output=True, text=True)
    if run.returncode != 0:
        usage_error("luac5.4 cannot read %s: %s" % (path, run.stderr.strip()))
    with open(path, encoding="utf-8", errors="replace") as f:
        lines = f.read().split("\n")
    found = []
    for m in LUA_RANGE.finditer(run.stdout):
        first, last = int(m.group(1)), int(m.group(2))
        src = lines[first - 1] if first <= len(lines) else ""
        name = "function@%d" % first
        for pat in LUA_NAME:
            nm = pat.search(src)
            if nm:
                name = nm.group(1)
                break
        found.append((name, first, last))
    return found


def python_functions(path):
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read(), path)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            first = min([node.lineno] + [d.lineno for d in node.decorator_list])
            found.append((node.name, first, node.end_lineno))
    return found


def measure(path):
    try:
        if path.endswith(C_EXT):
            return c_functions(path)
        if path.endswith(".lua"):
            return lua_functions(path)
        if path.endswith(".py"):
            return python_functions(path)
    except (OSError, SyntaxError) as e:
        usage_error("cannot measure %s: %s" % (path, e))
    return []


def tracked_files(paths):
    run = subprocess.run(["git", "-C", ROOT, "ls-files", "--"] + paths, capture_output=True, text=True)
    if run.returncode != 0:
        usage_error("git ls-files failed: " + run.stderr.strip())
    return [p for p in run.stdout.split("\n") if p.endswith(C_EXT + (".lua", ".py"))]


def read_allow(path):
    allow = {}
    if not os.path.exists(path):
        return allow
    with open(path, encoding="utf-8") as f:
        for no, line in enumerate(f, 1):
            line = line.split("#", 1)[0].strip()
            if not line:
                continue
            key, _, reason = line.partition(" ")
            if ":" not in key or not reason.strip():
                usage_error("%s:%d: want `path:function  reason`" % (path, no))
            allow[key] = reason.strip()
    return allow


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--limit", type=int, default=80)
    ap.add_argument("--top", type=int, default=15, help="how many of the longest to print")
    ap.add_argument("--report", action="store_true", help="print only; exit 0")
    ap.add_argument("--files", action="store_true", help="measure the given files as they are")
    ap.add_argument("--allow", default=ALLOW_FILE, help="the allow-list file")
    ap.add_argument("paths", nargs="*", default=DEFAULT_DIRS)
    args = ap.parse_args(argv)

    rows = []
    files = args.paths if args.files else tracked_files(args.paths)
    for rel in files:
        for name, first, last in measure(rel if args.files else os.path.join(ROOT, rel)):
            rows.append((last - first + 1, rel, name, first))
    rows.sort(key=lambda r: (-r[0], r[1], r[3]))
    allow = read_allow(args.allow)

    over = [r for r in rows if r[0] > args.limit]
    shown = rows[:max(args.top, len(over))]
    for length, rel, name, first in shown:
        key = "%s:%s" % (rel, name)
        mark = "  allowed: " + allow[key] if key in allow and length > args.limit else ""
        flag = "over" if length > args.limit else "    "
        print("%5d  %s  %s:%d  %s%s" % (length, flag, rel, first, name, mark))

    failing = [r for r in over if "%s:%s" % (r[1], r[2]) not in allow]
    over_keys = {"%s:%s" % (r[1], r[2]) for r in over}
    # an entry is stale when its file was measured (or is gone) and it names
    # no function over the limit
    measured = set(files)
    def gone(path):
        return not os.path.exists(path if args.files else os.path.join(ROOT, path))
    stale = sorted(k for k in allow if k not in over_keys and (k.split(":")[0] in measured or gone(k.split(":")[0])))
    for k in stale:
        print("fnlen: allow-list entry %s matches no function over %d lines; remove it" % (k, args.limit))
    print("fnlen: %d functions measured, %d over %d lines (%d allowed)"
          % (len(rows), len(over), args.limit, len(over) - len(failing)))
    if args.report:
        return 0
    return 1 if failing or stale else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
