#!/usr/bin/env bash
# One device call for the verified-domain work: the GPU tests (in the background) beside the model-style corpus,
# then the large task and the guards' cost. Logs and JSON under $OUT; the tables last.
export FORGE_CACHE_DIR=/tmp/fc PYTHONUNBUFFERED=1
(timeout 200 python3 -m pytest -q -m "gpu and not slow" -p no:cacheprovider tests/test_structured_inputs.py \
   tests/test_guards.py tests/test_adversarial.py -k "${GPU_K:-not nothing}" > "$OUT/gpu_tests.log" 2>&1
 timeout 30 python3 benchmarks/guard_cost.py --device cuda --out "$OUT/guard.json" > "$OUT/guard.log" 2>&1) &
timeout 175 python3 benchmarks/model_style_corpus.py --device cuda:0 --out "$OUT/corpus.json" --budget-s 150 --timing-budget 0.25 --first fused \
  > "$OUT/corpus.log" 2>&1
timeout 50 python3 -m forge_lsp.cli.main eval corpus/big/axpb_4g.py corpus/big/axpb_4g_torch.py --device cuda:0 \
  --json > "$OUT/big.json" 2> "$OUT/big.err"
wait
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
python3 -c "import json;d=json.load(open('$OUT/big.json'));v=d['verdict'];print('big', v['status'], v['reason'][:200], v.get('memory'))" 2>&1 | tail -2
grep -E "MISMATCH" "$OUT/corpus.log" | cut -c1-230 | head -40
tail -22 "$OUT/corpus.log" | grep -v MISMATCH
tail -6 "$OUT/guard.log"; grep -E "FAILED|ERROR|passed|failed" "$OUT/gpu_tests.log" | tail -25
