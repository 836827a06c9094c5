"""Races and out-of-bounds accesses in TPU interpret mode: JAX's race
detector with its comparisons vectorised, and a kernel's call whose race
report or out-of-bounds error becomes the candidate's verdict."""

import io
import re
import sys

from .errors import name_candidate
from .jaxcall import _sync


class _ClockRows:
    """The vector clocks of the accesses recorded for one buffer, as rows
    of one array, so that the clocks not ordered with a new access are
    found in one vectorised pass."""

    def __init__(self, width):
        import numpy as np
        self.rows, self.n = np.empty((64, width), np.int32), 0

    def add(self, clock):
        import numpy as np
        if self.n == len(self.rows):
            self.rows = np.concatenate([self.rows, np.empty_like(self.rows)])
        self.rows[self.n] = clock
        self.n += 1

    def unordered(self, clock, upto):
        """Indices below `upto` whose clock neither happened before `clock`
        nor after it (vector_clock.ordered false: equal clocks included)."""
        import numpy as np
        c = self.rows[:upto]
        le, ge = (c <= clock).all(1), (c >= clock).all(1)
        return np.flatnonzero(le == ge)  # both: equal; neither: concurrent


def _fast_race_checks():
    """TPU interpret mode's race detector compares a new access's vector
    clock with every earlier access to the same buffer, one numpy call per
    pair: quadratic in the accesses of a call (7p's ragged paged attention,
    ~8,700 page copies a call, spent ~90 ms a DMA on it; a 1,600-copy loop
    50 ms, 83 % of it in those comparisons). The same checks, the same
    pairs in the same order, with the comparisons of one access vectorised
    (_ClockRows). Returns whether it is installed (this JAX's detector has
    the shape it replaces)."""
    try:
        from jax._src.pallas.mosaic.interpret import race_detection_state as rds
        from jax._src import source_info_util
    except ImportError:
        return False
    cls = getattr(rds, "RaceDetectionState", None)
    overlap = getattr(rds, "_ranges_overlap", None)
    if cls is None or overlap is None or not hasattr(cls, "check_read") or not hasattr(cls, "check_write"):
        return False
    if getattr(cls, "_mk_fast", False):
        return True

    def rows(state, kind, key, width):
        table = state.__dict__.setdefault("_mk_rows", {})
        r = table.get((kind, key))
        if r is None:
            r = table[(kind, key)] = _ClockRows(width)
            for entry in (state.reads if kind == "r" else state.writes)[key]:  # recorded before: none, normally
                r.add(entry[2])
        return r

    def report(state, what, key, rnge, who, frame, clock, other, entry):
        print("RACE DETECTED\n  %s of buffer %s[%s] by %s, %s at %s\n  its clock: %s\n"
              "  races with the %s of [%s] by %s, %s at %s\n  whose clock: %s\n"
              % (what, key, rnge, who[0], who[1], frame, clock, other, entry[3], entry[0], entry[1], entry[4],
                 entry[2]))
        with state.lock:
            state.races_found = True

    def first_race(entries, found, clock, rnge):
        for i in found:
            if overlap(rnge, entries[i][3]):
                return entries[i]
        return None

    def frame_of(source_info):
        return source_info_util.summarize(source_info) if source_info is not None else "pallas_call"

    def check_read(self, device_id, local_core_id, clock, buffer_key, rnge, source_info=None):
        frame = frame_of(source_info)
        with self.lock:
            writes = self.writes[buffer_key]
            n_w = len(writes)
            w_rows = rows(self, "w", buffer_key, len(clock))
            r_rows = rows(self, "r", buffer_key, len(clock))
            self.reads[buffer_key].append((device_id, local_core_id, clock, rnge, frame))
            r_rows.add(clock)
        hit = first_race(writes, w_rows.unordered(clock, n_w), clock, rnge)
        if hit is not None:
            report(self, "read", buffer_key, rnge, (device_id, local_core_id), frame, clock, "write", hit)

    def check_write(self, device_id, local_core_id, clock, buffer_key, rnge, source_info=None):
        frame = frame_of(source_info)
        with self.lock:
            writes, reads = self.writes[buffer_key], self.reads[buffer_key]
            n_w, n_r = len(writes), len(reads)
            w_rows = rows(self, "w", buffer_key, len(clock))
            r_rows = rows(self, "r", buffer_key, len(clock))
            writes.append((device_id, local_core_id, clock, rnge, frame))
            w_rows.add(clock)
        who = (device_id, local_core_id)
        hit = first_race(writes, w_rows.unordered(clock, n_w), clock, rnge)
        if hit is not None:
            report(self, "write", buffer_key, rnge, who, frame, clock, "write", hit)
        hit = first_race(reads, r_rows.unordered(clock, n_r), clock, rnge)
        if hit is not None:
            report(self, "write", buffer_key, rnge, who, frame, clock, "read", hit)

    cls.check_read, cls.check_write, cls._mk_fast = check_read, check_write, True
    return True


def reset_tpu_interpret():
    """After an exception in a TPU-interpreted kernel its simulated state
    stays behind and must be reset before the next kernel runs."""
    from jax.experimental.pallas import tpu as pltpu
    pltpu.reset_tpu_interpret_mode_state()


class _Tee(io.TextIOBase):
    """sys.stdout while an interpreted kernel runs: everything still goes to
    `out` (stderr), and is kept so the race detector's report can be read."""

    def __init__(self, out):
        super().__init__()
        self.out, self.parts = out, []

    def write(self, s):
        self.parts.append(s)
        return self.out.write(s)

    def flush(self):
        self.out.flush()

    def text(self):
        return "".join(self.parts)


_RACE_RE = re.compile(r"RACE DETECTED\n(?:[^\n]*\n){0,4}")
# Element accesses ("Out-of-bounds read of ...") and BlockSpec index maps
# ("Out-of-bounds block index (0, 4) for input "a_ref" ...") alike.
_OOB_RE = re.compile(r"Out-of-bounds (?:read|write|block index)[^\n]*")


def _races_found():
    try:
        from jax._src.pallas.mosaic.interpret import interpret_pallas_call as ipc
    except ImportError:
        return False
    return bool(getattr(ipc.races, "races_found", False)) if ipc.races is not None else False


def _clear_races():
    try:
        from jax._src.pallas.mosaic.interpret import interpret_pallas_call as ipc
    except ImportError:
        return
    if ipc.races is not None:
        ipc.races.races_found = False


def call_checked(compiled, args, mode, candidate_path=None):
    """Call `compiled` and wait for it. In TPU interpret mode, a data race,
    an out-of-bounds access or (through NaN outputs, found by `check`) a
    read of uninitialised memory is the candidate's fault: returns
    (output, None) or (None, verdict) with status "incorrect" and a reason
    "race" | "out_of_bounds" that says which."""
    if mode != "tpu":
        out = compiled(*args)
        _sync(out)
        return out, None
    _clear_races()
    tee = _Tee(sys.stdout)
    saved, sys.stdout = sys.stdout, tee
    try:
        out = compiled(*args)
        _sync(out)
    except Exception as e:  # classified below, re-raised otherwise
        reset_tpu_interpret()
        m = _OOB_RE.search(name_candidate(str(e), candidate_path))
        if not m:
            raise
        return None, {"status": "incorrect", "correct": False, "reason": "out_of_bounds",
                      "message": "TPU interpret mode: the kernel accessed memory out of bounds: %s (a block "
                                 "index or pl.ds slice goes past the array or scratch buffer)" % m.group(0)}
    finally:
        sys.stdout = saved
    report = tee.text()
    if "RACE DETECTED" in report or _races_found():
        m = _RACE_RE.search(report)
        detail = name_candidate(m.group(0).strip().replace("\n", "; ") if m else "", candidate_path)
        return None, {"status": "incorrect", "correct": False, "reason": "race",
                      "message": "TPU interpret mode detected a data race (a read or write of a buffer while a "
                                 "DMA into it is in flight, or concurrent grid steps touching the same data: "
                                 "wait on the DMA semaphore before using the buffer)%s"
                                 % (": " + detail if detail else "")}
    return out, None
