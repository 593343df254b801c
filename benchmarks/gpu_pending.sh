#!/usr/bin/env bash
# One device call for what changed on the CPU machine since the last: the evaluation's time by stage
# (`benchmarks/eval_speed.py`, Triton and NVRTC candidates, one lane), an explanation of the cases named in
# EXPLAIN_CASES on the in-process and ncu paths (`benchmarks/explain_speed.py`), then `pytest -m gpu` over the test
# files in GPU_TESTS (default: every GPU test but the adversarial suite's and the judge's). Logs and JSON under $OUT;
# the short tables last.
#   EVAL_BUDGET / EXPLAIN_BUDGET / PYTEST_BUDGET   seconds (defaults 150 / 120 / 300); 0 skips that part
#   EVAL_ARGS     eval_speed.py's options (default: --skip-inline --sanitize); EVAL_RUNS: how many times (default 1)
#   EXPLAIN_CASES  name parts, comma-separated, or all (default level2_76)
#   JUDGE_CASES   explain cases whose Judge profile is timed too (default 0); EXPLAIN_PATHS (default cupti,ncu)
#   COUNTERS=1    after the evaluation timings, the counters pass by metric group (`benchmarks/counter_passes.py`)
export PYTHONUNBUFFERED=1
[ "${IPC_PROBE:-0}" != 0 ] && timeout 90 python3 benchmarks/ipc_probe.py > "$OUT/ipc-probe.log" 2>&1
if [ "${EVAL_BUDGET:-150}" != 0 ]; then  # first: nothing profiled on the device before it times
  for run in $(seq "${EVAL_RUNS:-1}"); do
    # shellcheck disable=SC2086
    timeout "${EVAL_BUDGET:-150}" python3 benchmarks/eval_speed.py ${EVAL_ARGS:---skip-inline --sanitize} \
      --out "$OUT/eval-speed-$run.json" > "$OUT/eval-speed-$run.log" 2>&1
  done
fi
[ "${COUNTERS:-0}" != 0 ] && timeout 90 python3 benchmarks/counter_passes.py --out "$OUT/counter-passes.json" \
  > "$OUT/counter-passes.log" 2>&1
if [ "${EXPLAIN_BUDGET:-120}" != 0 ]; then
  cases="${EXPLAIN_CASES:-level2_76}"; [ "$cases" = all ] && cases=""  # all: the flawed and the load_inline ones
  timeout "$((${EXPLAIN_BUDGET:-120} + 40))" python3 benchmarks/explain_speed.py --budget "${EXPLAIN_BUDGET:-120}" \
    --cases "$cases" --paths "${EXPLAIN_PATHS:-cupti,ncu}" --judge-cases "${JUDGE_CASES:-0}" \
    --out "$OUT/explain-speed.json" > "$OUT/explain-speed.log" 2>&1
fi
if [ "${PYTEST_BUDGET:-300}" != 0 ]; then
  default=$(grep -l "mark.gpu\|pytestmark = .*gpu" tests/test_*.py | grep -v -e test_adversarial -e test_judge | tr '\n' ' ')
  # shellcheck disable=SC2086
  # SIGINT at the budget: pytest stops as on Ctrl-C and still writes its summary (which tests failed, and why)
  timeout -s INT -k 30 "${PYTEST_BUDGET:-300}" python3 -m pytest -v --tb=short -m gpu -p no:cacheprovider -rf \
    --durations=10 ${GPU_TESTS:-$default} > "$OUT/gpu-tests.log" 2>&1
fi
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; nproc
[ -f "$OUT/ipc-probe.log" ] && tail -5 "$OUT/ipc-probe.log"
[ -f "$OUT/counter-passes.log" ] && tail -9 "$OUT/counter-passes.log"
for f in "$OUT"/eval-speed-*.log; do [ -f "$f" ] && grep -A16 "== forge eval speed" "$f" | cut -c1-200; done
[ -f "$OUT/explain-speed.log" ] && tail -14 "$OUT/explain-speed.log" | cut -c1-300
if [ -f "$OUT/gpu-tests.log" ]; then
  grep -E "^(FAILED|ERROR)" "$OUT/gpu-tests.log" | cut -c1-220 | head -20; tail -1 "$OUT/gpu-tests.log"
fi
true
