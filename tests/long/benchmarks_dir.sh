# Sourced by the tests in tests/long: sets $dir to the folder of the
# published benchmarks ($MK_BENCHMARKS, else ../shared/benchmarks beside
# the checkout or beside a worktree's parent), or skips the test (exit 77)
# naming what it needs: $1, the folders it reads (e.g. "jaxbench/").
dir=${MK_BENCHMARKS:-}
for d in ../shared/benchmarks ../../shared/benchmarks; do
  [ -z "$dir" ] && [ -d "$d/jaxbench" ] && dir=$d
done
if [ -z "$dir" ] || [ ! -d "$dir/jaxbench" ]; then
  echo "SKIP: no published benchmarks (set MK_BENCHMARKS to the folder holding $1)"
  exit 77
fi
