"""Arrays and JSON in files, numpy only: .npz files whose exotic types
(bfloat16, float8) are stored as their bits, and JSON written whole or not
at all."""

import io
import json
import os

from .errors import HarnessError


_EXOTIC = {"bfloat16": "uint16", "float8_e4m3fn": "uint8", "float8_e5m2": "uint8",
           "float8_e4m3fnuz": "uint8", "float8_e5m2fnuz": "uint8"}


def encode_array(a):
    """numpy array -> (storable numpy array, dtype name). Types numpy lacks
    (bfloat16, float8) are stored as their raw bits."""
    import numpy as np
    name = str(a.dtype)
    if name in _EXOTIC:
        return np.ascontiguousarray(a).view(_EXOTIC[name]), name
    return np.ascontiguousarray(a), name


def decode_array(stored, name, for_compare=False):
    """Inverse of encode_array. With for_compare, exotic types are widened to
    float32 with numpy alone (no ml_dtypes needed)."""
    import numpy as np
    if name not in _EXOTIC:
        return stored
    if for_compare:
        if name == "bfloat16":
            return (stored.astype(np.uint32) << 16).view(np.float32)
        try:
            import ml_dtypes
            return stored.view(getattr(ml_dtypes, name)).astype(np.float32)
        except ImportError:
            raise HarnessError("no_jax", "comparing %s needs ml_dtypes" % name)
    import ml_dtypes
    return stored.view(getattr(ml_dtypes, name))


def save_arrays(path, arrays):
    """Write a list of numpy arrays to an .npz; returns their meta list."""
    import numpy as np
    stored, meta = {}, []
    for i, a in enumerate(arrays):
        s, name = encode_array(np.asarray(a))
        stored["a%d" % i] = s
        meta.append({"dtype": name, "shape": list(s.shape)})
    buf = io.BytesIO()
    np.savez(buf, **stored)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(buf.getvalue())
    os.replace(tmp, path)
    return meta


def write_json(path, obj):
    """Write `obj` to `path` whole or not at all (through path.tmp), for a
    reader that may come while a step is stopped mid-write."""
    with open(path + ".tmp", "w") as f:
        json.dump(obj, f)
    os.replace(path + ".tmp", path)


def load_arrays(path, meta, for_compare=False):
    import numpy as np
    with np.load(path, allow_pickle=False) as z:
        return [decode_array(z["a%d" % i], m["dtype"], for_compare) for i, m in enumerate(meta)]
