#!/usr/bin/env bash
# One device call for device lanes: the lanes' GPU test (memory measured per worker, timings alone), the median
# evaluation time and the benchmark set's speedups on this machine with one lane and nothing beside it (eval_speed),
# then `benchmarks/batch_throughput.py` cold with the lanes given, its benchmark set compared with eval_speed's.
# JSON and logs under $OUT; the short tables last.
#   LANES / COLD_BUDGET / SPEED_BUDGET   (defaults: forge's / 280 / 120; SPEED_BUDGET=0 skips eval_speed)
#   SKIP_LANES_TEST=1                     skips the GPU test
export PYTHONUNBUFFERED=1
R=benchmarks/results
if [ -z "${SKIP_LANES_TEST:-}" ]; then
  timeout 150 python3 -m pytest -q -s -m gpu -p no:cacheprovider -rf \
    "tests/test_gpu_memory_gpu.py::test_three_lanes_on_one_gpu_each_candidate_s_memory_its_own_and_timed_alone" \
    > "$OUT/lanes-test.log" 2>&1
fi
if [ "${SPEED_BUDGET:-120}" != 0 ]; then
  timeout "${SPEED_BUDGET:-120}" python3 benchmarks/eval_speed.py --skip-inline --out "$OUT/eval-speed.json" \
    > "$OUT/eval-speed.log" 2>&1
fi
bench=$R/2026-12-01-h200-eval-speed-verifying-checks.json
[ -s "$OUT/eval-speed.json" ] && bench="$OUT/eval-speed.json"
cache=$(mktemp -d /tmp/forge-bt-XXXX)
lanes=${LANES:+--lanes $LANES}
# shellcheck disable=SC2086
timeout $((${COLD_BUDGET:-280} + 40)) python3 benchmarks/batch_throughput.py --device cuda:0 --label cold $lanes \
  --cache-dir "$cache" --budget-s "${COLD_BUDGET:-280}" --out "$OUT/cold.json" \
  --compare $R/2026-12-05-h200-batch-throughput-cold-judge-on-gpu.json --benchmark-set "$bench" \
  > "$OUT/cold.log" 2>&1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; nproc
[ -s "$OUT/lanes-test.log" ] && grep -E "^(FAILED|ERROR)|lanes |passed|failed|skipped" "$OUT/lanes-test.log" | cut -c1-300 | tail -6
tail -16 "$OUT/eval-speed.log" 2>/dev/null
grep -E "^(UNEXPECTED|CHANGED|BENCH)" "$OUT/cold.log" | cut -c1-200 | head -20; tail -22 "$OUT/cold.log" | cut -c1-400
true
