"""mkengine's harness for the JAX Pallas target, a package (run as
`python targets/pallas/harness <step> ...`: __main__.py)."""

from . import steps as _steps


def __getattr__(name):
    return getattr(_steps, name)
