#!/usr/bin/env bash
# Installs what is missing, builds, and serves the default model on 127.0.0.1:8080.
# The model: $TESSERA_MODEL, else the first models/*.gguf in the repo, else stories260K
# from ../shared; none of them when the arguments name models (-m/--model). Extra
# arguments go to `tessera serve` (e.g. --port 9000, --api-keys F); relative paths in
# them and in $TESSERA_MODEL are read from the directory run.sh was called from.
set -euo pipefail
caller=$PWD
cd "$(dirname "$0")/.."
repo=$PWD
scripts/setup.sh
scripts/build.sh build

has_model=0
port=8080
prev=
for a in "$@"; do
  case $a in -m | --model) has_model=1 ;; esac
  [ "$prev" = --port ] && port=$a
  prev=$a
done

args=()
if [ "$has_model" = 0 ]; then
  model=${TESSERA_MODEL:-}
  if [ -z "$model" ]; then
    for f in models/*.gguf; do
      [ -e "$f" ] && { model=$repo/$f; break; }
    done
  fi
  model=${model:-$repo/../shared/models/stories260K/stories260K.gguf}
  args=(-m "$model")
  echo "run: serving $model" >&2
fi
echo "run: try" >&2
echo "  curl -s http://127.0.0.1:$port/v1/completions -H 'Content-Type: application/json' \\" >&2
echo "       -d '{\"prompt\": \"Once upon a time\", \"max_tokens\": 64, \"temperature\": 0}'" >&2
cd "$caller"
exec "$repo/build/tessera" serve "${args[@]}" "$@"
