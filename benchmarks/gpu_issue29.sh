#!/usr/bin/env bash
# One device call for verdicts judged apart: the adversarial suite's GPU cases (the device's own classes, and the
# CPU-first classes c8-c16 run on the device), the judge's end-to-end tests, what judging apart costs on the GPU,
# and the median evaluation time with every check (eval_speed). Logs and JSON under $OUT; the tables last.
#   PYTEST_BUDGET / COST_BUDGET / SPEED_BUDGET  seconds for each part (defaults 330 / 90 / 150)
export PYTHONUNBUFFERED=1
timeout "${PYTEST_BUDGET:-330}" python3 -m pytest -q -m "gpu and not slow" -p no:cacheprovider -rf \
  tests/test_adversarial.py tests/test_judge.py > "$OUT/adversarial.log" 2>&1
timeout "${COST_BUDGET:-90}" python3 benchmarks/judge_cost.py --device cuda --rounds 2 \
  --out "$OUT/judge-cost.json" > "$OUT/judge-cost.log" 2>&1
timeout "${SPEED_BUDGET:-150}" python3 benchmarks/eval_speed.py --skip-inline --out "$OUT/eval-speed.json" \
  > "$OUT/eval-speed.log" 2>&1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; nproc
grep -E "^(FAILED|ERROR)" "$OUT/adversarial.log" | cut -c1-220 | head -40; tail -2 "$OUT/adversarial.log"
tail -8 "$OUT/judge-cost.log"
tail -24 "$OUT/eval-speed.log"
true
