#!/bin/sh
# harness.sh: the shell target's harness (docs/targets/writing-a-target.md).
# A kernel is a POSIX shell script: numbers on stdin, one line on stdout.
#   harness.sh run KERNEL IN_DIR OUT_DIR  run KERNEL on every IN_DIR/<case>.in,
#                                          writing OUT_DIR/<case>.out
#   harness.sh time KERNEL INPUT REPS     run it REPS times on INPUT; print
#                                          the nanoseconds they took
#   harness.sh check GOT_DIR WANT_DIR     print "ok", or the first case whose
#                                          output differs (and exit 1)
# `run` and `time` execute candidate code (the target sandboxes them);
# `check` reads the expected outputs and runs outside the sandbox.
set -u
cmd=$1
shift
case $cmd in
run)
  kernel=$1 in_dir=$2 out_dir=$3
  mkdir -p "$out_dir"
  for f in "$in_dir"/*.in; do
    c=$(basename "$f" .in)
    sh "$kernel" <"$f" >"$out_dir/$c.out" || { echo "case $c: the kernel exited with status $?"; exit 2; }
  done
  ;;
time)
  kernel=$1 input=$2 reps=$3
  start=$(date +%s%N)
  i=0
  while [ "$i" -lt "$reps" ]; do
    sh "$kernel" <"$input" >/dev/null || exit 2
    i=$((i + 1))
  done
  echo $(($(date +%s%N) - start))
  ;;
check)
  got=$1 want=$2
  for f in "$want"/*.out; do
    c=$(basename "$f")
    if ! cmp -s "$f" "$got/$c"; then
      echo "case ${c%.out}: got '$(cat "$got/$c" 2>/dev/null)', want '$(cat "$f")'"
      exit 1
    fi
  done
  echo ok
  ;;
*)
  echo "usage: harness.sh run|time|check ..." >&2
  exit 2
  ;;
esac
