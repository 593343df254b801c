#!/usr/bin/env bash
# One device call for profiling in the process (CUPTI) and the adversarial cases left from the last call: the source
# map's GPU tests on both paths, the server's explain hover on the GPU, the adversarial/judge GPU cases from
# ADVERSARIAL_FROM on, then `benchmarks/explain_speed.py` (spare, cold and ncu paths) with what time is left.
# Logs and JSON under $OUT; the short tables last.
#   ADVERSARIAL_FROM / TOTAL_S   (defaults 1 / 540)
export PYTHONUNBUFFERED=1
t0=$SECONDS
python3 -m pytest -q -m "gpu and not slow" --collect-only -p no:cacheprovider tests/test_adversarial.py \
  tests/test_judge.py 2>/dev/null | grep "::" | tail -n "+${ADVERSARIAL_FROM:-1}" > /tmp/adversarial-rest
timeout 130 python3 -m pytest -q -p no:cacheprovider -rf $(cat /tmp/adversarial-rest) > "$OUT/adversarial.log" 2>&1
timeout 110 python3 -m pytest -q -m gpu -p no:cacheprovider -rf tests/test_source_map.py > "$OUT/source-map.log" 2>&1
timeout 110 python3 -m pytest -q -m gpu -p no:cacheprovider -rf tests/test_server_gpu.py -k explain \
  > "$OUT/server.log" 2>&1
left=$(( ${TOTAL_S:-540} - (SECONDS - t0) - 45 ))
timeout "$((left + 40))" python3 benchmarks/explain_speed.py --budget "$left" --out "$OUT/explain-speed.json" \
  > "$OUT/explain-speed.log" 2>&1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
for f in adversarial source-map server; do
  echo "== $f"; grep -E "^(FAILED|ERROR)" "$OUT/$f.log" | cut -c1-240 | head -8; tail -1 "$OUT/$f.log"
done
grep -E "^E " "$OUT/source-map.log" "$OUT/server.log" | head -8 | cut -c1-300
tail -32 "$OUT/explain-speed.log" | cut -c1-240
true
