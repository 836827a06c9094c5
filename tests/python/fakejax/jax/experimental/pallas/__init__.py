"""jax.experimental.pallas stand-in: pallas_call run block by block in numpy.

Enough of Pallas's interpret semantics for the example kernels: a grid run
in lexicographic order, BlockSpec(block_shape, index_map) with index maps
returning block indices, blocks that overrun the array padded on read
(with garbage) and clipped on write, outputs starting as NaN. Tests only.
"""
import itertools

import numpy as _np

_ids = []


class BlockSpec:
    def __init__(self, block_shape=None, index_map=None, **_):
        self.block_shape, self.index_map = block_shape, index_map


def cdiv(a, b):
    return -(-a // b)


def program_id(axis):
    return _ids[axis]


def num_programs(axis):
    return _grid[axis]


_grid = ()


class _Ref:
    def __init__(self, arr):
        self.arr = arr
        self.shape, self.dtype = arr.shape, arr.dtype

    def __getitem__(self, k):
        return _np.array(self.arr[k])

    def __setitem__(self, k, v):
        self.arr[k] = v


def _window(shape, spec, idx):
    if spec is None or spec.block_shape is None:
        return tuple(slice(0, n) for n in shape), tuple(shape)
    bidx = spec.index_map(*idx)
    if not isinstance(bidx, tuple):
        bidx = (bidx,)
    bs = tuple(shape[i] if b is None else b for i, b in enumerate(spec.block_shape))
    return tuple(slice(int(b) * s, min(int(b) * s + s, n)) for b, s, n in zip(bidx, bs, shape)), bs


def pallas_call(kernel, out_shape, grid=(), in_specs=None, out_specs=None, interpret=False, **_):
    global _grid
    single = not isinstance(out_shape, (tuple, list))
    outs_sd = [out_shape] if single else list(out_shape)
    ospecs = [out_specs] if single else list(out_specs or [None] * len(outs_sd))
    grid = tuple(grid) if isinstance(grid, (tuple, list)) else (grid,)

    def call(*args):
        global _grid
        args = [_np.asarray(a) for a in args]
        ispecs = list(in_specs) if in_specs is not None else [None] * len(args)
        outs = [_np.full(sd.shape, _np.nan, sd.dtype) if _np.issubdtype(sd.dtype, _np.floating)
                else _np.zeros(sd.shape, sd.dtype) for sd in outs_sd]
        _grid = grid
        for idx in itertools.product(*[range(g) for g in grid]):
            _ids[:] = list(idx)
            refs, writes = [], []
            for a, sp in zip(args, ispecs):
                win, bs = _window(a.shape, sp, idx)
                blk = _np.full(bs, 7.0, a.dtype) if _np.issubdtype(a.dtype, _np.floating) else _np.zeros(bs, a.dtype)
                blk[tuple(slice(0, w.stop - w.start) for w in win)] = a[win]
                refs.append(_Ref(blk))
            for o, sp in zip(outs, ospecs):
                win, bs = _window(o.shape, sp, idx)
                blk = _np.array(o[win])
                full = _np.full(bs, _np.nan, o.dtype) if _np.issubdtype(o.dtype, _np.floating) else _np.zeros(bs, o.dtype)
                full[tuple(slice(0, w.stop - w.start) for w in win)] = blk
                refs.append(_Ref(full))
                writes.append((o, win, full))
            kernel(*refs)
            for o, win, full in writes:
                o[win] = full[tuple(slice(0, w.stop - w.start) for w in win)]
        return outs[0] if single else tuple(outs)
    return call
