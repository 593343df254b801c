#!/usr/bin/env bash
# One device call for GPU paths changed on the CPU machine: the adversarial suite's and the judge's GPU cases (the
# faster output comparison and fingerprint), the source map's GPU tests and what an explanation costs on each
# profiling path (`benchmarks/explain_speed.py`).
# Logs and JSON under $OUT; the short tables last.
#   PYTEST_BUDGET / EXPLAIN_BUDGET   seconds (defaults 250 / 150)
export PYTHONUNBUFFERED=1
timeout "${PYTEST_BUDGET:-250}" python3 -m pytest -q -m "gpu and not slow" -p no:cacheprovider -rf \
  tests/test_adversarial.py tests/test_judge.py > "$OUT/adversarial.log" 2>&1
timeout 120 python3 -m pytest -q -m gpu -p no:cacheprovider -rf tests/test_source_map.py tests/test_runtime_cuda_gpu.py \
  > "$OUT/source-map.log" 2>&1
timeout "$((${EXPLAIN_BUDGET:-150} + 40))" python3 benchmarks/explain_speed.py --budget "${EXPLAIN_BUDGET:-150}" \
  --out "$OUT/explain-speed.json" > "$OUT/explain-speed.log" 2>&1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; nproc
grep -E "^(FAILED|ERROR)" "$OUT/adversarial.log" | cut -c1-220 | head -30; tail -1 "$OUT/adversarial.log"
grep -E "^(FAILED|ERROR)" "$OUT/source-map.log" | cut -c1-220; tail -1 "$OUT/source-map.log"
tail -14 "$OUT/explain-speed.log"
true
