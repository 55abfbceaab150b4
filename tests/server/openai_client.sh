#!/usr/bin/env bash
# openai_client.sh: starts `tessera serve` on loopback and runs openai_client.cjs, which
# talks to it through the official `openai` npm package, then api_clients.cjs, which
# drives /v1/responses with it and /v1/messages with the official `@anthropic-ai/sdk`
# package (both installed into the build folder on first use).
# usage: openai_client.sh TESSERA_BINARY MODEL.gguf BUILD_DIR
set -euo pipefail
bin=$1 model=$2 build=$3
here=$(cd "$(dirname "$0")" && pwd)
npmdir=$(cd "$build" && pwd)/npm
"$here/npm_modules.sh" "$npmdir" openai@4.95.0 @anthropic-ai/sdk@0.71.2

log=$(mktemp)
"$bin" serve -m "$model" --host 127.0.0.1 --port 0 2>"$log" &
spid=$!
stop_server() {
  kill -TERM "$spid" 2>/dev/null && wait "$spid" 2>/dev/null || true
  rm -f "$log"
}
trap stop_server EXIT
port=
for _ in $(seq 100); do
  port=$(sed -n 's/.*listening on http:\/\/127.0.0.1:\([0-9]*\).*/\1/p' "$log")
  [ -n "$port" ] && break
  sleep 0.1
done
[ -n "$port" ] || { echo "server did not start:"; cat "$log"; exit 1; }

# The greedy continuation `tessera generate` prints after the prompt.
prompt="Once upon a time"
full=$("$bin" generate -m "$model" -p "$prompt" -n 20 2>/dev/null)
expected=${full#"$prompt"}

OPENAI_MODULE="$npmdir/node_modules/openai" timeout 120 node "$here/openai_client.cjs" \
  "http://127.0.0.1:$port" "$expected"
OPENAI_MODULE="$npmdir/node_modules/openai" \
  ANTHROPIC_MODULE="$npmdir/node_modules/@anthropic-ai/sdk" \
  timeout 120 node "$here/api_clients.cjs" "http://127.0.0.1:$port"
