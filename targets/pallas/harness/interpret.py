"""Interpret modes: plain (interpret=True on every pallas_call) and TPU
interpret mode (Pallas TPU kernels run on the CPU with simulated memory,
DMAs and semaphores), its parameters, and the progress it makes (grid
steps, DMAs) written for the engine while a run goes on."""

import os
import time

from .errors import HarnessError
from .arrays import write_json
from .races import _fast_race_checks


def _install_interpret(jax):
    """Plain interpret mode: force interpret=True on every pallas_call (runs
    anywhere, also CPU, without TPU memory semantics)."""
    try:
        from jax.experimental import pallas as pl
    except ImportError:
        return
    orig = pl.pallas_call
    if getattr(orig, "_mk_interpret", False):
        return

    def pallas_call(*a, **k):
        k.setdefault("interpret", True)
        return orig(*a, **k)
    pallas_call._mk_interpret = True
    pl.pallas_call = pallas_call


INTERPRET_MODES = ("auto", "tpu", "plain", "off")


def interpret_mode(jax, mode):
    """The interpret mode a step runs in: 'tpu' (TPU interpret mode: Pallas
    TPU kernels run on the CPU with simulated HBM/VMEM, DMAs and semaphores,
    race detection, NaN-filled uninitialised memory, raising out-of-bounds
    reads), 'plain' (interpret=True) or 'off' (native). 'auto' is 'tpu' when
    JAX's backend is the CPU, else 'off'."""
    mode = {"1": "plain", "true": "plain", "0": "off", "false": "off", "": "auto", None: "auto"}.get(mode, mode)
    if mode not in INTERPRET_MODES:
        raise HarnessError("bad_args", "interpret mode %r is not one of %s" % (mode, ", ".join(INTERPRET_MODES)))
    if mode == "auto":
        return "tpu" if jax.default_backend() == "cpu" else "off"
    return mode


# Entries of the race detector's vector clocks. JAX's default (2 x cores)
# missed a race between two DMAs in flight (B's destination read after A's
# wait, before B's); every DMA in flight needs its own entry to be ordered.
VECTOR_CLOCK_SIZE = 16


# What TPU interpret mode has simulated in this process: grid steps (its
# grid_point_recorder) and DMAs started. A run that runs out of time tells
# from it a kernel the interpreter is too slow for (still counting when it
# was stopped) from one that hangs (a semaphore never signalled, a loop
# without steps): ProgressFile.
PROGRESS = {"steps": 0, "dmas": 0}


def _count_step(token, *_):
    PROGRESS["steps"] += 1
    return token


def _count_dmas():
    """Count the DMAs TPU interpret mode starts (its dma_start, looked up
    when a kernel is traced)."""
    try:
        from jax._src.pallas.mosaic.interpret import interpret_pallas_call as ipc
    except ImportError:  # another JAX: no DMA count, steps still counted
        return
    orig = getattr(ipc, "dma_start", None)
    if orig is None or getattr(orig, "_mk_count", False):
        return

    def dma_start(*a, **k):
        PROGRESS["dmas"] += 1
        return orig(*a, **k)
    dma_start._mk_count = True
    ipc.dma_start = dma_start


def tpu_interpret_params():
    from jax.experimental.pallas import tpu as pltpu
    _count_dmas()
    _fast_race_checks()
    # DMAs run when started ("eager"), not at their wait: a copy never waited
    # for (an unguarded prefetch past the array's end) was never run nor
    # bounds-checked; the race detector still sees a read before the wait.
    params = dict(detect_races=True, out_of_bounds_reads="raise", uninitialized_memory="nan",
                  vector_clock_size=VECTOR_CLOCK_SIZE, dma_execution_mode="eager")
    try:
        return pltpu.InterpretParams(grid_point_recorder=_count_step, **params)
    except TypeError:  # a JAX without the recorder
        return pltpu.InterpretParams(**params)


class ProgressFile:
    """While a run's calls go on, write DIR/progress.json ({"steps",
    "dmas", "case", "call", "wall": time.time()}) each second the counts
    moved, so that the engine can tell, when the run passes its limit,
    whether the interpreter was still simulating the kernel."""

    def __init__(self, outputs, period_s=1.0):
        import threading
        self.path, self.period_s, self.where = os.path.join(outputs, "progress.json"), period_s, {}
        self.done = threading.Event()
        threading.Thread(target=self._loop, name="mk-progress", daemon=True).start()

    def _loop(self):
        last = (PROGRESS["steps"], PROGRESS["dmas"])
        while not self.done.wait(self.period_s):
            now = (PROGRESS["steps"], PROGRESS["dmas"])
            if now == last:
                continue
            last = now
            write_json(self.path, dict(PROGRESS, wall=time.time(), **self.where))

    def close(self):
        self.done.set()
