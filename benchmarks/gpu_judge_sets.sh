#!/usr/bin/env bash
# One device call for the judge's sets in a sealed file (`engine.sealed`): the evaluation's time by stage with the
# sets mapped and with them on the pipes (`eval_speed.py --fast-only`, A/B on one machine), the adversarial and judge
# GPU cases, then the GPU tests named in GPU_TESTS. Logs and JSON under $OUT; the short tables last.
#   EVAL_BUDGET / ADV_BUDGET / PYTEST_BUDGET   seconds for each part (defaults 110 / 240 / 150); 0 skips that part
#   SKIP_PIPES=1   no second evaluation run with the sets on the pipes
#   ADV_K          a pytest -k expression choosing among the adversarial and judge cases (default: all)
export PYTHONUNBUFFERED=1
run_eval() {  # $1: FORGE_JUDGE_SEALED
  FORGE_JUDGE_SEALED=$1 timeout "${EVAL_BUDGET:-110}" python3 benchmarks/eval_speed.py --fast-only \
    --out "$OUT/eval-speed-sealed$1.json" > "$OUT/eval-speed-sealed$1.log" 2>&1
}
[ "${EVAL_BUDGET:-110}" != 0 ] && run_eval 1
if [ "${ADV_BUDGET:-240}" != 0 ]; then
  timeout -s INT -k 20 "${ADV_BUDGET:-240}" python3 -m pytest -q -m "gpu and not slow" -p no:cacheprovider -rf \
    --tb=short ${ADV_K:+-k "$ADV_K"} tests/test_adversarial.py tests/test_judge.py > "$OUT/adversarial.log" 2>&1
fi
if [ "${PYTEST_BUDGET:-150}" != 0 ] && [ -n "$GPU_TESTS" ]; then
  # shellcheck disable=SC2086
  timeout -s INT -k 20 "${PYTEST_BUDGET:-150}" python3 -m pytest -v --tb=short -m gpu -p no:cacheprovider -rf \
    --durations=10 $GPU_TESTS > "$OUT/gpu-tests.log" 2>&1
fi
[ "${EVAL_BUDGET:-110}" != 0 ] && [ "${SKIP_PIPES:-0}" = 0 ] && run_eval 0
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
for f in "$OUT"/eval-speed-sealed*.log; do grep -A30 "== forge eval speed" "$f" | grep -v "^    " | cut -c1-160; done
[ -f "$OUT/adversarial.log" ] && { grep -E "^(FAILED|ERROR)" "$OUT/adversarial.log" | cut -c1-200 | head; tail -1 "$OUT/adversarial.log"; }
[ -f "$OUT/gpu-tests.log" ] && { grep -E "^(FAILED|ERROR)" "$OUT/gpu-tests.log" | cut -c1-300 | head; tail -1 "$OUT/gpu-tests.log"; }
true
