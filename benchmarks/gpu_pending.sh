#!/usr/bin/env bash
# One device call for GPU paths changed on the CPU machine: the adversarial suite's and the judge's GPU cases (the
# faster output comparison and fingerprint), the source map's GPU test, the in-process CUPTI probe (range profiler
# and PC sampling with CUDA 13.0's struct sizes) and what an explanation costs (`benchmarks/explain_speed.py`).
# Logs and JSON under $OUT; the short tables last. Needs .whl-cupti carried for the probe.
#   PYTEST_BUDGET / EXPLAIN_BUDGET   seconds (defaults 250 / 150)
export PYTHONUNBUFFERED=1
timeout "${PYTEST_BUDGET:-250}" python3 -m pytest -q -m "gpu and not slow" -p no:cacheprovider -rf \
  tests/test_adversarial.py tests/test_judge.py > "$OUT/adversarial.log" 2>&1
timeout 120 python3 -m pytest -q -m gpu -p no:cacheprovider -rf tests/test_source_map.py tests/test_runtime_cuda_gpu.py \
  > "$OUT/source-map.log" 2>&1
if [ -d .whl-cupti ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/cupti .whl-cupti/*.whl
  lib="$(python3 -c 'import nvidia, os; print(os.path.join(list(nvidia.__path__)[0], "cu13", "lib"))')"
  for part in range pcs kineto; do
    LD_LIBRARY_PATH="$lib:${LD_LIBRARY_PATH:-}" PYTHONPATH="$PYTHONPATH:/tmp/cupti" timeout 45 \
      python3 benchmarks/profiler/cupti/probe.py "$part" > "$OUT/cupti-$part.log" 2>&1
  done
fi
timeout "$((${EXPLAIN_BUDGET:-150} + 40))" python3 benchmarks/explain_speed.py --budget "${EXPLAIN_BUDGET:-150}" \
  --out "$OUT/explain-speed.json" > "$OUT/explain-speed.log" 2>&1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; nproc
grep -E "^(FAILED|ERROR)" "$OUT/adversarial.log" | cut -c1-220 | head -30; tail -1 "$OUT/adversarial.log"
grep -E "^(FAILED|ERROR)" "$OUT/source-map.log" | cut -c1-220; tail -1 "$OUT/source-map.log"
for part in range pcs kineto; do echo "== cupti $part"; tail -6 "$OUT/cupti-$part.log" 2>/dev/null | cut -c1-300; done
tail -14 "$OUT/explain-speed.log"
true
