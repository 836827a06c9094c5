#!/usr/bin/env bash
# Device check of the Pallas target, for a machine with JAX and a GPU or TPU
# (a few minutes). It runs:
#   1. the JAX environment: version, backend, devices;
#   2. the Python harness tests with real JAX (interpret-mode Pallas kernels
#      included): tests/python/test_pallas_harness.py;
#   3. end to end on examples/tasks/pallas/rmsnorm, natively on the device:
#      freeze -> compile/test/bench/profile of a Pallas kernel, the XLA
#      baseline, the held-out cases, and the expected failures of the bank's
#      compile-error and wrong kernels;
#   4. if build/mkengine exists: the Lua pallas test and `mkengine eval`.
# Prints one PASS/FAIL line per check and a summary; exit 0 only if all pass.
# Logs: $OUT (set by the device tool) or $MK_CHECK_DIR or /tmp/mk-device-check.
# Usage: scripts/device_check.sh [--quick]   (--quick: skip step 2)
set -uo pipefail
cd "$(dirname "$0")/.."
PY=${MK_PYTHON:-python3}
LOG=${OUT:-${MK_CHECK_DIR:-/tmp/mk-device-check}}
mkdir -p "$LOG"
WORK=$(mktemp -d /tmp/mk-device-check.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
export PYTHONUNBUFFERED=1 XLA_PYTHON_CLIENT_PREALLOCATE=false
H=targets/pallas/harness.py
TASK=examples/tasks/pallas/rmsnorm
BANK=$TASK/scripted
TOL=(--atol 1e-4 --rtol 1e-4)
pass=0; fail=0; results=()

record() { # record NAME OK DETAIL
  if [ "$2" = 1 ]; then pass=$((pass + 1)); results+=("PASS  $1  $3")
  else fail=$((fail + 1)); results+=("FAIL  $1  $3"); fi
  echo "${results[-1]}"
}

# jget FILE EXPR: evaluate a Python expression over the JSON object `r`.
jget() { "$PY" -c "import json,sys; r=json.load(open(sys.argv[1])); print($2)" "$1" 2>/dev/null; }

# harness STEP NAME WANT_STATUS ARGS...: run one harness step, check its status.
harness() {
  local name=$1 want=$2; shift 2
  local out="$LOG/$name.json"
  timeout 600 "$PY" "$H" "$@" >"$out" 2>"$LOG/$name.stderr"
  local got; got=$(jget "$out" "r.get('status')")
  local msg; msg=$(jget "$out" "(r.get('message') or (r.get('error') or {}).get('message') or '')[:160].replace(chr(10),' ')")
  if [ "$got" = "$want" ]; then record "$name" 1 "status=$got"
  else record "$name" 0 "status=${got:-none} want=$want: $msg (see $LOG/$name.stderr)"; fi
}

echo "== 1. environment"
if ! "$PY" - <<'EOF' 2>&1 | tee "$LOG/env.txt"; then
import jax, jaxlib
d = jax.devices()
print("python", __import__("sys").version.split()[0], "jax", jax.__version__, "jaxlib", jaxlib.__version__)
print("backend", jax.default_backend(), "devices", [(x.platform, getattr(x, "device_kind", "")) for x in d])
EOF
  record env 0 "JAX is not importable by $PY (set MK_PYTHON to an interpreter with JAX)"
  exit 1
fi
record env 1 "$(tail -1 "$LOG/env.txt")"
BACKEND=$("$PY" -c "import jax; print(jax.default_backend())" 2>/dev/null)
[ "$BACKEND" = cpu ] && echo "note: no accelerator; the native steps below run Pallas on CPU and may fail to lower (use MK_PALLAS_INTERPRET=1)"

if [ "${1:-}" != "--quick" ]; then
  echo "== 2. harness tests with real JAX"
  if timeout 900 "$PY" -m unittest discover -s tests/python -p 'test_pallas*.py' -v >"$LOG/unittest.txt" 2>&1; then
    record unittest 1 "$(grep -E '^(OK|Ran)' "$LOG/unittest.txt" | tr '\n' ' ')"
  else
    record unittest 0 "$(grep -E '^(FAILED|Ran)|^(FAIL|ERROR):' "$LOG/unittest.txt" | head -8 | tr '\n' ' ')"
  fi
fi

echo "== 3. end to end on $TASK ($BACKEND)"
T=$WORK/tests
harness freeze ok freeze --task "$TASK" "${TOL[@]}" --tests "$T" --seeds 0,1 --heldout 1001
harness compile_rows ok compile --task "$TASK" "${TOL[@]}" --tests "$T" --candidate "$BANK/pallas_rows.py"
harness test_rows ok test --task "$TASK" "${TOL[@]}" --tests "$T" --candidate "$BANK/pallas_rows.py"
harness heldout_rows ok test --task "$TASK" "${TOL[@]}" --tests "$T" --candidate "$BANK/pallas_rows.py" --heldout-cases
harness test_rows_tuned ok test --task "$TASK" "${TOL[@]}" --tests "$T" --candidate "$BANK/pallas_rows.py" --params '{"block_rows": 64}'
harness test_rows_interpret ok test --task "$TASK" "${TOL[@]}" --tests "$T" --candidate "$BANK/pallas_rows.py" --interpret
harness compile_typo compile_error compile --task "$TASK" "${TOL[@]}" --tests "$T" --candidate "$BANK/pallas_typo.py"
harness test_wrong_eps incorrect test --task "$TASK" "${TOL[@]}" --tests "$T" --candidate "$BANK/pallas_wrong_eps.py"
harness test_two_pass ok test --task "$TASK" "${TOL[@]}" --tests "$T" --candidate "$BANK/pallas_two_pass.py"
harness bench_rows ok bench --task "$TASK" "${TOL[@]}" --tests "$T" --candidate "$BANK/pallas_rows.py" --iters 50
harness profile_rows ok profile --task "$TASK" "${TOL[@]}" --tests "$T" --candidate "$BANK/pallas_rows.py" --iters 20
harness baseline ok baseline --task "$TASK" "${TOL[@]}" --tests "$T" --iters 50
K=$(jget "$LOG/bench_rows.json" "'%.4g ms (%s, spread %.2f)' % (r['latency_s']*1e3, r['method'], r['spread'])")
B=$(jget "$LOG/baseline.json" "'%.4g ms (%s)' % (r['latency_s']*1e3, r['method'])")
S=$("$PY" -c "import json; a=json.load(open('$LOG/baseline.json'))['latency_s']; b=json.load(open('$LOG/bench_rows.json'))['latency_s']; print('%.2fx' % (a/b))" 2>/dev/null)
echo "   pallas_rows: ${K:-?}  XLA baseline: ${B:-?}  speedup: ${S:-?}"
echo "   profile: $(jget "$LOG/profile_rows.json" "r.get('text','')")"
TE=$(jget "$LOG/bench_rows.json" "r.get('trace_error','')")
[ -n "$TE" ] && echo "   note: profiler trace unusable, wall time used: $TE"

if [ -x build/mkengine ]; then
  echo "== 4. Lua target and mkengine eval"
  if timeout 900 build/mkengine script tests/lua/pallas_test.lua >"$LOG/lua_pallas.txt" 2>&1; then
    record lua_pallas 1 "$(tail -1 "$LOG/lua_pallas.txt")"
  else
    record lua_pallas 0 "$(grep -E '^FAIL' "$LOG/lua_pallas.txt" | head -3 | tr '\n' ' ') $(tail -1 "$LOG/lua_pallas.txt")"
  fi
  cp "$BANK/pallas_rows.py" "$WORK/kernel.py"
  timeout 900 build/mkengine eval "$TASK" "$WORK/kernel.py" --json >"$LOG/eval.json" 2>"$LOG/eval.stderr"
  st=$(jget "$LOG/eval.json" "r.get('status')")
  record mkengine_eval "$([ "$st" = ok ] && echo 1 || echo 0)" \
    "status=${st:-none} $(jget "$LOG/eval.json" "(r.get('message') or '')[:160]")"
else
  echo "== 4. skipped: build/mkengine not built (cmake -S . -B build && cmake --build build)"
fi

echo
echo "== summary ($BACKEND): $pass passed, $fail failed; logs in $LOG"
printf '%s\n' "${results[@]}" | tee "$LOG/summary.txt"
[ "$fail" = 0 ]
