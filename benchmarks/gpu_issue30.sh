#!/usr/bin/env bash
# One device call for whole-model modes: the CUDA-graph mode's own test, then `benchmarks/model_wide.py` on the
# models and dtypes given, with the whole-model modes given. JSON and logs under $OUT; the table last.
#   MODELS / DTYPES / MODES   (defaults resnet / bfloat16 / channels_last,channels_last+default,blocks,cuda_graphs)
#   TOP / MODULE_BUDGET / FORGE_TIMEOUT   forge's --top, --module-budget and each run's limit (1 / 60 / 420)
#   MODE_TEST=0   skip the CUDA-graph mode's test
export PYTHONUNBUFFERED=1
[ "${MODE_TEST:-1}" != 0 ] && timeout 120 python3 -m pytest -q -m gpu -p no:cacheprovider -rf tests/test_model_wide.py -k cuda_graphs \
  > "$OUT/gpu-tests.log" 2>&1
# the script's own limit: each model and dtype's forge run plus its torch.compile timing (a limit of one run's
# killed the second model of a list)
runs=$(( $(echo "${MODELS:-resnet}" | tr ',' '\n' | wc -l) * $(echo "${DTYPES:-bfloat16}" | tr ',' '\n' | wc -l) ))
timeout $(( (${FORGE_TIMEOUT:-420} + 60) * runs )) python3 benchmarks/model_wide.py --device cuda:0 \
  --models "${MODELS:-resnet}" --dtypes "${DTYPES:-bfloat16}" --top "${TOP:-1}" \
  --module-budget "${MODULE_BUDGET:-60}" --forge-timeout "${FORGE_TIMEOUT:-420}" \
  --model-modes "${MODES:-channels_last,channels_last+default,blocks,cuda_graphs}" \
  --log-dir "$OUT/logs" --out "$OUT/model-wide.json" > "$OUT/model-wide.log" 2>&1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
[ -f "$OUT/gpu-tests.log" ] && tail -3 "$OUT/gpu-tests.log"
grep -E "whole forward|  [a-z_+-]+: |speedup|outcome" "$OUT/logs/"*.log | cut -c1-220 | tail -20
tail -4 "$OUT/model-wide.log"
true
