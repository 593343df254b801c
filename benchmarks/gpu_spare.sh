#!/usr/bin/env bash
# One short device call for the spare profiled process: the source map's GPU tests in a spare (hot lines on the
# candidate's own lines), then `benchmarks/explain_speed.py` on the spare path only, the Judge's profile included.
export PYTHONUNBUFFERED=1
timeout 100 python3 -m pytest -q -m gpu -p no:cacheprovider -rf tests/test_source_map.py -k spare > "$OUT/spare-tests.log" 2>&1
timeout "$((${BUDGET:-120} + 40))" python3 benchmarks/explain_speed.py --paths cupti --budget "${BUDGET:-120}" \
  --out "$OUT/explain-spare.json" > "$OUT/explain-spare.log" 2>&1
nvidia-smi --query-gpu=name --format=csv,noheader
grep -E "^(FAILED|ERROR)|^E " "$OUT/spare-tests.log" | cut -c1-240 | head -8; tail -1 "$OUT/spare-tests.log"
tail -14 "$OUT/explain-spare.log" | cut -c1-240
true
