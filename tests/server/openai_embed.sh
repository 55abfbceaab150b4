#!/usr/bin/env bash
# openai_embed.sh: makes a tiny qwen3 embedding model with `tessera synth --pooling last`
# (the vocabulary of CHAT.gguf), serves it as "embed" beside CHAT.gguf as "chat" on
# loopback and runs openai_embed.cjs, which calls embeddings.create through the official
# `openai` npm package (installed into the build folder on first use).
# usage: openai_embed.sh TESSERA_BINARY CHAT.gguf BUILD_DIR
set -euo pipefail
bin=$1 vocab=$2 build=$3
here=$(cd "$(dirname "$0")" && pwd)
npmdir=$(cd "$build" && pwd)/npm
"$here/npm_modules.sh" "$npmdir" openai@4.95.0

tmp=$(mktemp -d)
log=$tmp/serve.log
"$bin" synth --shape qwen3-4b --tiny --pooling last --vocab "$vocab" -o "$tmp/embed.gguf" 2>/dev/null
"$bin" serve -m chat="$vocab" -m embed="$tmp/embed.gguf" --host 127.0.0.1 --port 0 2>"$log" &
spid=$!
stop_server() {
  kill -TERM "$spid" 2>/dev/null && wait "$spid" 2>/dev/null || true
  rm -rf "$tmp"
}
trap stop_server EXIT
port=
for _ in $(seq 100); do
  port=$(sed -n 's/.*listening on http:\/\/127.0.0.1:\([0-9]*\).*/\1/p' "$log")
  [ -n "$port" ] && break
  sleep 0.1
done
[ -n "$port" ] || { echo "server did not start:"; cat "$log"; exit 1; }

OPENAI_MODULE="$npmdir/node_modules/openai" timeout 60 node "$here/openai_embed.cjs" \
  "http://127.0.0.1:$port"
