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
dir=${MK_BENCHMARKS:-}
for d in ../shared/benchmarks ../../shared/benchmarks; do
  [ -z "$dir" ] && [ -d "$d/jaxbench" ] && dir=$d
done
if [ -z "$dir" ] || [ ! -d "$dir/jaxbench" ]; then
  echo "SKIP: no published benchmarks (set MK_BENCHMARKS to the folder holding jaxbench/ and maxkernel/)"
  exit 77
fi
rc=0
for layout in jaxbench maxkernel; do
  echo "== $dir/$layout"
  "$build/mkengine" suite check "$dir/$layout" --fresh || rc=1
done
# The expert kernels (examples/expert) are tests/long/expert_kernels.sh.
exit $rc
