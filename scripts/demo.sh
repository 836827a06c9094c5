#!/usr/bin/env bash
# The offline demo: install what is missing, build, then run a beam search
# on the rmsnorm C task with the embedded SCRIPTED model (an offline test
# double answering from the task's bank, no network, no API key) on the CPU
# target, and show the search tree and the best kernel.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh build
run=runs/demo-$(date +%Y%m%d-%H%M%S)
set +e
build/mkengine run beam examples/tasks/c/rmsnorm --model scripted --set depth=2 --run-dir "$run"
code=$?
set -e
echo
build/mkengine tree "$run" || true
echo
echo "Inspect it:   build/mkengine show $run    |  build/mkengine show $run NODE"
echo "Report:       build/mkengine report $run -o $run/report.html"
echo "Best kernel:  $run/best/"
exit $code
