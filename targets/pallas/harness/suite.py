"""The frozen suite on disk, without JAX: its SHA-256 manifest (the
sha256sum format the C target writes too), cases.json and each case's
inputs file."""

import hashlib
import json
import os

from .errors import HarnessError


MANIFEST = "manifest.sha256"


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def write_manifest(tests_dir):
    """Hash every file under tests_dir into manifest.sha256 (sha256sum
    format: "<hex>  <relative path>"), the same file the C target writes."""
    lines = []
    for root, dirs, names in os.walk(tests_dir):
        dirs.sort()
        for n in sorted(names):
            p = os.path.join(root, n)
            rel = os.path.relpath(p, tests_dir)
            if rel == MANIFEST or rel.endswith(".tmp"):
                continue
            lines.append("%s  %s\n" % (sha256_file(p), rel))
    lines.sort(key=lambda l: l.split("  ", 1)[1])
    tmp = os.path.join(tests_dir, MANIFEST + ".tmp")
    with open(tmp, "w") as f:
        f.writelines(lines)
    os.replace(tmp, os.path.join(tests_dir, MANIFEST))
    return len(lines)


def read_manifest(tests_dir):
    mpath = os.path.join(tests_dir, MANIFEST)
    if not os.path.isfile(mpath):
        raise HarnessError("no_tests", "no %s in %s: freeze the tests first" % (MANIFEST, tests_dir))
    files = {}
    with open(mpath) as f:
        for ln in f:
            ln = ln.rstrip("\n")
            if not ln:
                continue
            digest, _, rel = ln.partition("  ")
            if len(digest) != 64 or not rel:
                raise HarnessError("tampered", "%s: malformed line %r" % (MANIFEST, ln))
            files[rel] = digest
    return files


def verify_manifest(tests_dir, subset=None):
    """Check the files of the manifest (only those under the top-level dirs
    in `subset` when given; cases.json always). Raises HarnessError
    ('tampered' | 'no_tests') on any mismatch."""
    files = read_manifest(tests_dir)
    if "cases.json" not in files:
        raise HarnessError("tampered", "cases.json is not in the manifest")
    for rel, digest in sorted(files.items()):
        if subset and rel != "cases.json" and rel.split("/", 1)[0] not in subset:
            continue
        p = os.path.join(tests_dir, rel)
        if not os.path.isfile(p):
            raise HarnessError("tampered", "frozen test file missing: %s" % rel)
        if sha256_file(p) != digest:
            raise HarnessError("tampered", "frozen test file changed: %s" % rel)
    return files


def case_shapes(tests_dir, cid):
    """', inputs (5, 7) float32, (7,) float32' for a failing case's message:
    the model repairing a kernel needs the shapes, not only the case id."""
    try:
        with open(os.path.join(tests_dir, "inputs", cid + ".json")) as f:
            meta = json.load(f)
        parts = ["(%s) %s" % (", ".join(str(d) for d in m["shape"]) + ("," if len(m["shape"]) == 1 else ""),
                              m.get("dtype", "")) for m in meta.get("inputs", [])]
    except (OSError, ValueError, KeyError, TypeError):
        return ""
    return ", inputs " + ", ".join(p.strip() for p in parts) if parts else ""


def read_cases(tests_dir):
    with open(os.path.join(tests_dir, "cases.json")) as f:
        return json.load(f)


def case_ids(tests_dir, heldout=False):
    """The frozen case ids of one group, from cases.json."""
    return [c["id"] for c in read_cases(tests_dir)["cases"] if bool(c.get("heldout")) == heldout]


def case_entry(tests_dir, cid):
    """cases.json's entry of case `cid` ({} when there is none)."""
    return next((c for c in read_cases(tests_dir)["cases"] if c["id"] == cid), {})


def read_case(tests_dir, cid):
    with open(os.path.join(tests_dir, "inputs", cid + ".json")) as f:
        return json.load(f)
