"""Cost of TPU interpret mode's race detection per DMA (BENCHMARKS.md,
"Race checks in TPU interpret mode").

  .venv/bin/python bench/pallas_race_bench.py [N,N,...] [--jax-own]

A Pallas kernel copies N pages of 8 x 128 float32 one after another from
HBM into a two-slot VMEM buffer (start, wait, read), the shape of a paged
attention's page loop. It prints the milliseconds per copy of one call
(after a call that compiles it) with race detection off and on: on, with
the harness's vectorised checks (targets/pallas/harness/races.py
_fast_race_checks), or with JAX's own (--jax-own), whose cost grows with
the copies before. Runs on the CPU."""

import importlib
import os
import sys
import time

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

HERE = os.path.dirname(os.path.abspath(__file__))


def races():
    """The harness's race checks (targets/pallas/harness/races.py)."""
    sys.path.insert(0, os.path.join(HERE, "..", "targets", "pallas"))
    return importlib.import_module("harness.races")


def kernel(x_hbm, o_ref, buf, sem):
    def page(i, acc):
        copy = pltpu.make_async_copy(x_hbm.at[i], buf.at[i % 2], sem.at[0])
        copy.start()
        copy.wait()
        return acc + buf[i % 2]
    o_ref[...] = jax.lax.fori_loop(0, x_hbm.shape[0], page, jnp.zeros((8, 128), jnp.float32))


def ms_per_copy(n, races):
    x = jnp.ones((n, 8, 128), jnp.float32)
    params = pltpu.InterpretParams(detect_races=races, dma_execution_mode="eager", vector_clock_size=16)
    f = pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((8, 128), jnp.float32),
                       in_specs=[pl.BlockSpec(memory_space=pl.ANY)],
                       scratch_shapes=[pltpu.VMEM((2, 8, 128), jnp.float32), pltpu.SemaphoreType.DMA((1,))],
                       interpret=params)
    jax.block_until_ready(f(x))
    t0 = time.perf_counter()
    y = jax.block_until_ready(f(x))
    dt = time.perf_counter() - t0
    assert float(y[0, 0]) == n, float(y[0, 0])
    return dt / n * 1e3


def main(argv):
    sizes = [int(v) for v in (argv[0].split(",") if argv and not argv[0].startswith("-") else ["200", "800", "1600"])]
    own = "--jax-own" in argv
    if not own and not races()._fast_race_checks():
        sys.exit("the harness's race checks do not fit this JAX")
    print("machine: load %.2f %.2f %.2f" % os.getloadavg())
    print("race checks: %s" % ("JAX's own" if own else "vectorised (harness)"))
    for n in sizes:
        off, on = ms_per_copy(n, False), ms_per_copy(n, True)
        print("%5d copies: %.2f ms a copy without race detection, %.2f ms with" % (n, off, on), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
