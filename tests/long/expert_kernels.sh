#!/usr/bin/env bash
# Hand-written kernels for the published JAXBench tasks' own shapes
# (examples/expert/<task>/, each folder's README says what each file is),
# judged by `mkengine eval` on this CPU: a right kernel must get `ok` (or
# the verdict its README gives), a wrong, racy, out-of-bounds or cheating
# one never `ok` (issue 21's "done when"). Minutes a kernel in TPU
# interpret mode: ctest label `long`, left out of scripts/test.sh; run it
# with `cd build && ctest -L long -R expert --output-on-failure`.
# The benchmarks live outside the repository: $MK_BENCHMARKS, else
# ../shared/benchmarks beside the checkout (or beside a worktree's parent).
# Arguments (optional): TASK:FILE:VERDICT triples to run instead of all
# (TASK alone: the JAXBench layout; LAYOUT/TASK: another).
set -uo pipefail
cd "$(dirname "$0")/../.."
build=${MKENGINE_BUILD:-build}
. tests/long/benchmarks_dir.sh "jaxbench/"
kernels=(
  8p_GEMM:expert:ok 8p_GEMM:expert_floor:ok 8p_GEMM:wrong:incorrect 8p_GEMM:oob:incorrect
  8p_GEMM:racy:incorrect 8p_GEMM:cheat:compile_error
  1p_Flash_Attention:expert:ok 1p_Flash_Attention:expert_dma:ok 1p_Flash_Attention:wrong:incorrect
  1p_Flash_Attention:wrong_causal:incorrect 1p_Flash_Attention:oob:incorrect
  1p_Flash_Attention:racy:incorrect 1p_Flash_Attention:cheat:rejected maxkernel/1p_Flash_Attention:expert:ok
  4p_Sparse_Attention:expert:ok 4p_Sparse_Attention:wrong:incorrect
  7p_Ragged_Paged_Attention:expert:ok 7p_Ragged_Paged_Attention:wrong:incorrect
  13p_Cross_Entropy:expert:ok 13p_Cross_Entropy:wrong:incorrect 13p_Cross_Entropy:cheat:rejected
  maxkernel/29k_Matmul_Swish_Sum_GroupNorm:expert:ok maxkernel/29k_Matmul_Swish_Sum_GroupNorm:racy:incorrect
  maxkernel/29k_Matmul_Swish_Sum_GroupNorm:cheat:rejected
)
[ $# -gt 0 ] && kernels=("$@")
rc=0
for tkv in "${kernels[@]}"; do
  IFS=: read -r task k want <<<"$tkv"
  t0=$(date +%s)
  case $task in */*) path=$dir/$task ;; *) path=$dir/jaxbench/$task ;; esac # LAYOUT/TASK: another layout
  got=$("$build/mkengine" eval "$path" "examples/expert/${task#*/}/$k.py" --no-tune --no-profile --fresh \
    --json | python3 -c 'import json, sys; r = json.load(sys.stdin); print(r["status"], "|", "%.0f" % (r.get("peak_rss_mb") or 0),
      "|", r.get("message", "")[:400])')
  status=${got%% |*} rest=${got#*| }
  echo "$task/$k: $status (want $want) in $(($(date +%s) - t0)) s, peak ${rest%% |*} MB: ${rest#*| }"
  [ "$status" = "$want" ] || rc=1
done
exit $rc
