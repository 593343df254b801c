#!/usr/bin/env bash
# One device call for the verified-domain work: the GPU tests (in the background) beside the model-style corpus,
# then the large task and the guards' cost. Logs and JSON under $OUT; the tables last.
#   CORPUS_ARGS   arguments for benchmarks/model_style_corpus.py (default: the whole corpus, fused first)
#   CORPUS_BUDGET seconds for the corpus (default 150)
#   GPU_TESTS=0   skip the GPU tests; GPU_K: their -k filter
#   EXTRAS=0      skip the large task and the guards' cost
export FORGE_CACHE_DIR=${FORGE_CACHE_DIR:-/tmp/fc} PYTHONUNBUFFERED=1
budget=${CORPUS_BUDGET:-150}
if [ "${GPU_TESTS:-1}" != 0 ]; then
  (timeout $((budget + 20)) python3 -m pytest -q -rP -m "gpu and not slow" -p no:cacheprovider tests/test_structured_inputs.py \
     tests/test_guards.py tests/test_adversarial.py -k "${GPU_K:-not nothing}" > "$OUT/gpu_tests.log" 2>&1) &
fi
if [ "${EXTRAS:-1}" != 0 ]; then
  (timeout 30 python3 benchmarks/guard_cost.py --device cuda --out "$OUT/guard.json" > "$OUT/guard.log" 2>&1) &
fi
# shellcheck disable=SC2086
timeout $((budget + 25)) python3 benchmarks/model_style_corpus.py --device cuda:0 --out "$OUT/corpus.json" \
  --budget-s "$budget" --timing-budget 0.25 ${CORPUS_ARGS:---first fused} > "$OUT/corpus.log" 2>&1
if [ "${EXTRAS:-1}" != 0 ]; then
  timeout 50 python3 -m forge_lsp.cli.main eval corpus/big/axpb_4g.py corpus/big/axpb_4g_torch.py --device cuda:0 \
    --json > "$OUT/big.json" 2> "$OUT/big.err"
fi
wait
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
[ -s "$OUT/big.json" ] && python3 -c "import json;d=json.load(open('$OUT/big.json'));v=d['verdict'];print('big', v['status'], v['reason'][:200], v.get('memory'))" 2>&1 | tail -2
grep -E "^MISMATCH" "$OUT/corpus.log" | cut -c1-260 | head -40
tail -24 "$OUT/corpus.log" | grep -v "^MISMATCH"
[ -s "$OUT/guard.log" ] && tail -6 "$OUT/guard.log"
[ -s "$OUT/gpu_tests.log" ] && grep -E "FAILED|ERROR|passed|failed" "$OUT/gpu_tests.log" | cut -c1-300 | tail -25
true
[ -s "$OUT/gpu_tests.log" ] && grep -E "^(g8|gi)-[a-z0-9-]+: " "$OUT/gpu_tests.log" | sort -u
true
