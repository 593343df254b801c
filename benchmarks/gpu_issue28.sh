#!/usr/bin/env bash
# One device call for batch throughput: benchmarks/batch_throughput.py cold (a new compile cache), then warm (the
# same cache). JSON and logs under $OUT; the tables last.
#   COLD_BUDGET / WARM_BUDGET  seconds for each run (defaults 300 / 200; WARM_BUDGET=0 skips the warm run)
#   BT_ARGS                    more arguments for both runs (e.g. --compare benchmarks/results/...json)
export PYTHONUNBUFFERED=1
R=benchmarks/results
BT_ARGS=${BT_ARGS:---compare $R/2026-12-03-h200-model-style-corpus.json $R/2026-12-02-h200-batch-memory.json --benchmark-set $R/2026-12-01-h200-eval-speed-verifying-checks.json}
cache=$(mktemp -d /tmp/forge-bt-XXXX)
# shellcheck disable=SC2086
timeout $((${COLD_BUDGET:-300} + 40)) python3 benchmarks/batch_throughput.py --device cuda:0 --label cold \
  --cache-dir "$cache" --budget-s "${COLD_BUDGET:-300}" --out "$OUT/cold.json" ${BT_ARGS:-} > "$OUT/cold.log" 2>&1
if [ "${WARM_BUDGET:-200}" != 0 ]; then
  # shellcheck disable=SC2086
  timeout $((${WARM_BUDGET:-200} + 40)) python3 benchmarks/batch_throughput.py --device cuda:0 --label warm \
    --cache-dir "$cache" --budget-s "${WARM_BUDGET:-200}" --out "$OUT/warm.json" ${BT_ARGS:-} > "$OUT/warm.log" 2>&1
fi
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; nproc; free -g | head -2
# split builds whose main.cpp linked a shared bindings object, and how many such objects were compiled
echo "split builds: $(grep -l 'forge_split_prelude' "$cache"/torch_extensions/*/main.cpp 2>/dev/null | wc -l)," \
  "with a bindings object: $(grep -l 'forge-bindings' "$cache"/torch_extensions/*/main.cpp 2>/dev/null | wc -l)," \
  "bindings objects compiled: $(ls "$cache"/split_bindings/*.o 2>/dev/null | wc -l)"
for f in cold warm; do [ -s "$OUT/$f.log" ] && { grep -E "^(UNEXPECTED|CHANGED|BENCH)" "$OUT/$f.log" | cut -c1-200 | head -40; tail -4 "$OUT/$f.log"; }; done
true
