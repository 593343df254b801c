#!/usr/bin/env bash
# The real-VS-Code end-to-end test of the forge-lsp extension (`npm run e2e`):
#   1. e2e/setup.sh installs Node 24 + code-server (cached in <repo>/.cache/vscode-e2e) and checks chromium;
#   2. the test is compiled (e2e/tsconfig.json -> e2e/out/) and run with node's test runner: it installs
#      the .vsix into a fresh code-server profile, opens a temp workspace in headless chromium and
#      walks the acceptance scenario (e2e/scenario.test.ts).
# Artifacts (screenshots, logs, summary.md with per-step timings): <repo>/.ci/artifacts/vscode-e2e/.
#
# Usage: e2e/run.sh [VSIX]
#   VSIX           the package to test; else $FORGE_E2E_VSIX; else the newest editor-client/*.vsix
#   FORGE_PYTHON   the interpreter with forge-lsp installed (default <repo>/.venv/bin/python)
#   FORGE_E2E_KEEP=1  keep the temp workspace/profile (path printed at the end)
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
client="$(cd "$here/.." && pwd)"
repo="$(cd "$client/.." && pwd)"
t0=$(date +%s)

vsix="${1:-${FORGE_E2E_VSIX:-}}"
if [ -z "$vsix" ]; then
  vsix="$(ls -t "$client"/*.vsix 2>/dev/null | head -n 1 || true)"
fi
if [ -z "$vsix" ] || [ ! -f "$vsix" ]; then
  echo "e2e: no .vsix to test (pass one, set FORGE_E2E_VSIX, or run 'npx vsce package --no-dependencies' in editor-client)" >&2
  exit 2
fi
vsix="$(cd "$(dirname "$vsix")" && pwd)/$(basename "$vsix")"
export FORGE_PYTHON="${FORGE_PYTHON:-$repo/.venv/bin/python}"
[ -x "$FORGE_PYTHON" ] || { echo "e2e: no Python at $FORGE_PYTHON (set FORGE_PYTHON)" >&2; exit 2; }

# setup.sh prints E2E_NODE=..., E2E_CODE_SERVER=..., E2E_CHROMIUM=... on its last lines
assignments="$(bash "$here/setup.sh" | grep -E '^E2E_(NODE|CODE_SERVER|CHROMIUM)=')"
eval "$assignments"
export E2E_NODE E2E_CODE_SERVER E2E_CHROMIUM
t1=$(date +%s)

cd "$client"
rm -rf e2e/out
node_modules/.bin/tsc -p e2e/tsconfig.json
t2=$(date +%s)

export FORGE_E2E_VSIX="$vsix"
export FORGE_E2E_PRE_TIMINGS="setup.sh (Node 24, code-server, chromium)=$((t1 - t0));compile the test=$((t2 - t1))"
echo "e2e: testing $vsix with $FORGE_PYTHON (setup $((t1 - t0)) s, compile $((t2 - t1)) s)" >&2
status=0
# --test-force-exit: a timed-out test leaves handles (browser, code-server pipes) that must not keep node alive
node --test --test-force-exit --test-reporter=spec e2e/out/e2e/scenario.test.js || status=$?
echo "e2e: total $(( $(date +%s) - t0 )) s; artifacts in ${FORGE_E2E_ARTIFACTS:-$repo/.ci/artifacts/vscode-e2e}" >&2
exit $status
