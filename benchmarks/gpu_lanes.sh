#!/usr/bin/env bash
# One device call for device lanes: the lanes' GPU test (memory measured per worker, timings alone), then
# `benchmarks/batch_throughput.py` cold with the lanes given, then the median evaluation time (eval_speed).
# JSON and logs under $OUT; the short tables last.
#   LANES / COLD_BUDGET / SPEED_BUDGET   (defaults: forge's / 280 / 120; SPEED_BUDGET=0 skips eval_speed)
export PYTHONUNBUFFERED=1
R=benchmarks/results
timeout 150 python3 -m pytest -q -s -m gpu -p no:cacheprovider -rf \
  "tests/test_gpu_memory_gpu.py::test_three_lanes_on_one_gpu_each_candidate_s_memory_its_own_and_timed_alone" \
  > "$OUT/lanes-test.log" 2>&1
cache=$(mktemp -d /tmp/forge-bt-XXXX)
lanes=${LANES:+--lanes $LANES}
# shellcheck disable=SC2086
timeout $((${COLD_BUDGET:-280} + 40)) python3 benchmarks/batch_throughput.py --device cuda:0 --label cold $lanes \
  --cache-dir "$cache" --budget-s "${COLD_BUDGET:-280}" --out "$OUT/cold.json" \
  --compare $R/2026-12-05-h200-batch-throughput-cold-judge-on-gpu.json \
  --benchmark-set $R/2026-12-01-h200-eval-speed-verifying-checks.json > "$OUT/cold.log" 2>&1
if [ "${SPEED_BUDGET:-120}" != 0 ]; then
  timeout "${SPEED_BUDGET:-120}" python3 benchmarks/eval_speed.py --skip-inline --out "$OUT/eval-speed.json" \
    > "$OUT/eval-speed.log" 2>&1
fi
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; nproc
grep -E "^(FAILED|ERROR)|lanes |passed|failed|skipped" "$OUT/lanes-test.log" | cut -c1-300 | tail -6
grep -E "^(UNEXPECTED|CHANGED|BENCH)" "$OUT/cold.log" | cut -c1-200 | head -20; tail -22 "$OUT/cold.log" | cut -c1-400
tail -18 "$OUT/eval-speed.log" 2>/dev/null
true
