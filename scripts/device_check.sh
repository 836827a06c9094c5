#!/usr/bin/env bash
# Device check of the Pallas target on a machine with JAX and a GPU (or a
# TPU), well under 6 minutes. It runs:
#   1. the JAX environment: version, backend, devices;
#   2. the real banks natively (scripts/device_bench.py): every kernel of
#      examples/tasks/pallas/rmsnorm and examples/suites/pallas/*/scripted on
#      the task's own shapes, lowered with Triton and with Mosaic GPU on a GPU
#      (Mosaic TPU on a TPU), checked against the reference, and the correct
#      ones timed against XLA; speedups go to $LOG/speedups-<backend>.json;
#   3. end to end through the harness, natively: freeze (no test scaling on
#      a device) -> compile/test/bench/profile of pallas_rows, the XLA
#      baseline, held-out cases, the typo kernel (compile_error);
#   4. if build/mkengine exists: `mkengine eval` of pallas_rows, natively.
#   --full adds the CPU test suites (Python harness tests and the Lua pallas
#   test, forced onto the CPU in TPU interpret mode; several minutes).
# One PASS/FAIL line per check and a summary; exit 0 only if all pass. A bank
# kernel written for the TPU that does not lower on a GPU is reported in the
# JSON, not failed; a kernel expected correct that gives wrong results fails.
# Logs: $OUT (set by the device tool) or $MK_CHECK_DIR or /tmp/mk-device-check.
# Usage: scripts/device_check.sh [--full]
set -uo pipefail
cd "$(dirname "$0")/.."
if [ -n "${MK_PYTHON:-}" ]; then PY=$MK_PYTHON
elif [ -x .venv/bin/python ] && .venv/bin/python -c 'import jax' 2>/dev/null; then PY=.venv/bin/python
else PY=python3; fi
LOG=${OUT:-${MK_CHECK_DIR:-/tmp/mk-device-check}}
mkdir -p "$LOG"
WORK=$(mktemp -d /tmp/mk-device-check.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
export PYTHONUNBUFFERED=1 XLA_PYTHON_CLIENT_PREALLOCATE=false
H=targets/pallas/harness  # a package, run as a folder
TASK=examples/tasks/pallas/rmsnorm
BANK=$TASK/scripted
NATIVE=(--interpret off)
pass=0; fail=0; results=()
T0=$(date +%s)

record() { # record NAME OK DETAIL
  if [ "$2" = 1 ]; then pass=$((pass + 1)); results+=("PASS  $1  $3")
  else fail=$((fail + 1)); results+=("FAIL  $1  $3"); fi
  echo "${results[-1]}"
}

# jget FILE EXPR: evaluate a Python expression over the JSON object `r`.
jget() { "$PY" -c "import json,sys; r=json.load(open(sys.argv[1])); print($2)" "$1" 2>/dev/null; }

# harness NAME WANT_STATUS STEP ARGS...: run one harness step, check its status.
harness() {
  local name=$1 want=$2; shift 2
  local out="$LOG/$name.json"
  timeout 300 "$PY" "$H" "$@" >"$out" 2>"$LOG/$name.stderr"
  local got; got=$(jget "$out" "r.get('status')")
  local msg; msg=$(jget "$out" "(r.get('message') or (r.get('error') or {}).get('message') or '')[:160].replace(chr(10),' ')")
  if [ "$got" = "$want" ]; then record "$name" 1 "status=$got"
  else record "$name" 0 "status=${got:-none} want=$want: $msg (see $LOG/$name.stderr)"; fi
}

echo "== 1. environment"
if ! "$PY" - <<'PYEOF' 2>&1 | tee "$LOG/env.txt"; then
import jax, jaxlib
d = jax.devices()
print("python", __import__("sys").version.split()[0], "jax", jax.__version__, "jaxlib", jaxlib.__version__)
print("backend", jax.default_backend(), "devices", [(x.platform, getattr(x, "device_kind", "")) for x in d])
PYEOF
  record env 0 "JAX is not importable by $PY (run scripts/setup.sh or set MK_PYTHON)"
  exit 1
fi
record env 1 "$(tail -1 "$LOG/env.txt")"
BACKEND=$("$PY" -c "import jax; print(jax.default_backend())" 2>/dev/null)
[ "$BACKEND" = cpu ] && echo "note: no accelerator: the native steps below fail by design (Pallas on a CPU needs interpret mode)"

echo "== 2. real banks natively ($BACKEND)"
case "$BACKEND" in
  gpu|cuda|rocm) LOWERINGS="triton mosaic_gpu" ;;
  *) LOWERINGS="native" ;;
esac
for lw in $LOWERINGS; do
  js="$LOG/speedups-$lw.json"
  if timeout 240 "$PY" scripts/device_bench.py "$lw" --out "$js" >"$LOG/bank-$lw.txt" 2>"$LOG/bank-$lw.stderr"; then
    cat "$LOG/bank-$lw.txt"
    # correctness: a kernel expected fast/slow must not be wrong where it runs
    bad=$(jget "$js" "' '.join('%s/%s' % (t.split('/')[-1], k) for t, row in r['tasks'].items() for k, x in row['kernels'].items() if x['expect'] in ('fast', 'slow') and x['status'] == 'incorrect')")
    nok=$(jget "$js" "sum(1 for row in r['tasks'].values() for x in row['kernels'].values() if x['status'] == 'ok')")
    gm=$(jget "$js" "(lambda s: '%.2fx' % __import__('math').exp(sum(map(__import__('math').log, s)) / len(s)) if s else '-')([x['speedup'] for row in r['tasks'].values() for x in row['kernels'].values() if x['status'] == 'ok' and x['expect'] == 'fast'])")
    if [ -z "$bad" ]; then record "bank_$lw" 1 "$nok kernels correct and timed; geomean speedup of the 'fast' ones $gm ($js)"
    else record "bank_$lw" 0 "expected correct but wrong: $bad ($js)"; fi
  else
    record "bank_$lw" 0 "device_bench.py failed: $(tail -3 "$LOG/bank-$lw.stderr" | tr '\n' ' ')"
  fi
done

echo "== 3. end to end through the harness on $TASK ($BACKEND, native)"
T=$WORK/tests
harness freeze ok freeze --task "$TASK" --tests "$T" --seeds 0,1 --heldout 1001
harness compile_rows ok compile --task "$TASK" --tests "$T" --candidate "$BANK/pallas_rows.py" "${NATIVE[@]}"
harness test_rows ok test --task "$TASK" --tests "$T" --candidate "$BANK/pallas_rows.py" "${NATIVE[@]}"
harness heldout_rows ok test --task "$TASK" --tests "$T" --candidate "$BANK/pallas_rows.py" --heldout-cases "${NATIVE[@]}"
harness compile_typo compile_error compile --task "$TASK" --tests "$T" --candidate "$BANK/pallas_typo.py" "${NATIVE[@]}"
harness bench_rows ok bench --task "$TASK" --tests "$T" --candidate "$BANK/pallas_rows.py" --iters 50 "${NATIVE[@]}"
harness profile_rows ok profile --task "$TASK" --tests "$T" --candidate "$BANK/pallas_rows.py" --iters 20 "${NATIVE[@]}"
harness baseline ok baseline --task "$TASK" --tests "$T" --iters 50
echo "   profile: $(jget "$LOG/profile_rows.json" "r.get('text','')")"
TE=$(jget "$LOG/bench_rows.json" "r.get('trace_error','')")
[ -n "$TE" ] && echo "   note: profiler trace unusable, wall time used: $TE"

if [ -x build/mkengine ]; then
  echo "== 4. mkengine eval (native)"
  cp "$BANK/pallas_rows.py" "$WORK/kernel.py"
  MK_PYTHON=$PY MK_PALLAS_INTERPRET=off timeout 240 build/mkengine eval "$TASK" "$WORK/kernel.py" --json \
    >"$LOG/eval.json" 2>"$LOG/eval.stderr"
  st=$(jget "$LOG/eval.json" "r.get('status')")
  record mkengine_eval "$([ "$st" = ok ] && echo 1 || echo 0)" \
    "status=${st:-none} $(jget "$LOG/eval.json" "(r.get('message') or '')[:160]")"
else
  echo "== 4. skipped: build/mkengine not built (scripts/setup.sh)"
fi

if [ "${1:-}" = "--full" ]; then
  echo "== 5. CPU test suites (TPU interpret mode)"
  if JAX_PLATFORMS=cpu timeout 1200 "$PY" -m unittest discover -s tests/python -p 'test_pallas*.py' >"$LOG/unittest.txt" 2>&1; then
    record unittest 1 "$(grep -E '^(OK|Ran)' "$LOG/unittest.txt" | tr '\n' ' ')"
  else
    record unittest 0 "$(grep -E '^(FAILED|Ran)|^(FAIL|ERROR):' "$LOG/unittest.txt" | head -8 | tr '\n' ' ')"
  fi
  if [ -x build/mkengine ]; then
    if MK_PYTHON=$PY JAX_PLATFORMS=cpu timeout 900 build/mkengine script tests/lua/pallas_test.lua >"$LOG/lua_pallas.txt" 2>&1; then
      record lua_pallas 1 "$(tail -1 "$LOG/lua_pallas.txt")"
    else
      record lua_pallas 0 "$(grep -E '^FAIL' "$LOG/lua_pallas.txt" | head -3 | tr '\n' ' ') $(tail -1 "$LOG/lua_pallas.txt")"
    fi
  fi
fi

echo
echo "== summary ($BACKEND): $pass passed, $fail failed in $(( $(date +%s) - T0 )) s; logs in $LOG"
printf '%s\n' "${results[@]}" | tee "$LOG/summary.txt"
[ "$fail" = 0 ]
