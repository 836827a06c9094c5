#!/usr/bin/env bash
# Every reference of the published JAXBench tasks, in both layouts, checked
# as a candidate by `mkengine suite check` (issue 21's "done when"). Hours
# on a 2-core machine: ctest label `long`, left out of scripts/test.sh;
# run it with `cd build && ctest -L long --output-on-failure`.
# The benchmarks live outside the repository: $MK_BENCHMARKS, else
# ../shared/benchmarks beside the checkout (or beside a worktree's parent).
set -uo pipefail
cd "$(dirname "$0")/../.."
build=${MKENGINE_BUILD:-build}
. tests/long/benchmarks_dir.sh "jaxbench/ and maxkernel/"
rc=0
for layout in jaxbench maxkernel; do
  echo "== $dir/$layout"
  "$build/mkengine" suite check "$dir/$layout" --fresh || rc=1
done
# The expert kernels (examples/expert) are tests/long/expert_kernels.sh.
exit $rc
