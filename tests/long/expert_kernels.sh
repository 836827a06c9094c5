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
# Each evaluation must also end within $EXPERT_MAX_S seconds (600) with no
# harness process above $EXPERT_MAX_MB MiB (3815: 4 GB), by its own
# peak_rss_mb and by a sampler that reads every harness process's resident
# memory from /proc twice a second (the evaluations here run one at a time).
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
max_s=${EXPERT_MAX_S:-600} max_mb=${EXPERT_MAX_MB:-3815}
peaks=$(mktemp)
trap 'rm -f "$peaks"; [ -n "${sampler:-}" ] && kill "$sampler" 2>/dev/null' EXIT
# twice a second: the time and the largest resident memory (KiB) of a process running the Pallas harness
(
  while :; do
    m=0
    for p in /proc/[0-9]*/; do
      grep -qs 'pallas/harness' "$p/cmdline" || continue
      r=$(awk '/^VmRSS/ {print $2}' "$p/status" 2>/dev/null)
      [ -n "$r" ] && [ "$r" -gt "$m" ] && m=$r
    done
    echo "$(date +%s) $m" >>"$peaks"
    sleep 0.5
  done
) &
sampler=$!
rc=0
for tkv in "${kernels[@]}"; do
  IFS=: read -r task k want <<<"$tkv"
  t0=$(date +%s)
  case $task in */*) path=$dir/$task ;; *) path=$dir/jaxbench/$task ;; esac # LAYOUT/TASK: another layout
  got=$("$build/mkengine" eval "$path" "examples/expert/${task#*/}/$k.py" --no-tune --no-profile --fresh \
    --json | python3 -c 'import json, sys; r = json.load(sys.stdin); print(r["status"], "|", "%.0f" % (r.get("peak_rss_mb") or 0),
      "|", r.get("message", "")[:400])')
  status=${got%% |*} rest=${got#*| } took=$(($(date +%s) - t0))
  sampled=$(awk -v t0="$t0" '$1 >= t0 && $2 > m {m = $2} END {printf "%d", m / 1024}' "$peaks") peak=${rest%% |*}
  echo "$task/$k: $status (want $want) in $took s, peak $peak MB (sampled $sampled MB): ${rest#*| }"
  [ "$status" = "$want" ] || rc=1
  if [ "$took" -gt "$max_s" ] || [ "$peak" -gt "$max_mb" ] || [ "$sampled" -gt "$max_mb" ]; then
    echo "  over the bounds: $max_s s, $max_mb MiB a harness process"
    rc=1
  fi
done
exit $rc
