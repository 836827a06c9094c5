"""The harness's command line, and nothing else:

  python targets/pallas/harness <step> [args...]      one step, one JSON object on stdout (cli.py)
  python targets/pallas/harness worker --inbox DIR     a pre-started process (worker.py)

(`python -m harness` with targets/pallas on sys.path runs it too.)"""

import os
import sys

# Run as a folder, Python puts the folder itself first on sys.path: name its
# parent instead, so that `harness` is this package and the package's
# modules are never top-level ones a task's or JAX's imports could find.
if not __package__:
    here = os.path.dirname(os.path.realpath(__file__))
    if sys.path and os.path.realpath(sys.path[0] or ".") == here:
        sys.path[0] = os.path.dirname(here)

from harness import cli, limits, worker

if sys.argv[1:2] == ["worker"]:
    sys.exit(worker.worker(sys.argv[2:]))
limits.watch_engine()
sys.exit(cli.main())
