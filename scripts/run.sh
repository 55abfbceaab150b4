#!/usr/bin/env bash
# Installs what is missing, builds, and serves the default model on 127.0.0.1:8080.
# The model: $TESSERA_MODEL, else the first models/*.gguf in the repo, else stories260K
# from ../shared. Extra arguments go to `tessera serve` (e.g. --port 9000, --api-keys F).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh build

model=${TESSERA_MODEL:-}
if [ -z "$model" ]; then
  for f in models/*.gguf; do
    [ -e "$f" ] && { model=$f; break; }
  done
fi
model=${model:-../shared/models/stories260K/stories260K.gguf}

echo "run: serving $model; try:" >&2
echo "  curl -s http://127.0.0.1:8080/v1/completions -H 'Content-Type: application/json' \\" >&2
echo "       -d '{\"prompt\": \"Once upon a time\", \"max_tokens\": 64, \"temperature\": 0}'" >&2
exec build/tessera serve -m "$model" "$@"
