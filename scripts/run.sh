#!/usr/bin/env bash
# Installs what serving needs, builds the tessera binary alone, and serves on
# 127.0.0.1:8080. The model: the arguments' -m, else $TESSERA_MODEL, else the first
# *.gguf in this repository's models/ (git-ignored), $TESSERA_MODELS or ./models, else the
# built-in stories260K (models/default/). Extra arguments go to `tessera serve` (e.g.
# --port 9000, --api-keys F); relative paths in them and in $TESSERA_MODEL are read from
# the directory run.sh was called from. Tests and benchmarks: scripts/test.sh.
set -euo pipefail
caller=$PWD
cd "$(dirname "$0")/.."
repo=$PWD
scripts/setup.sh --serve
# A fresh build directory is configured without tests and benchmarks (their packages are
# not installed here); one configured already keeps its options. Either way only the
# binary is built.
if [ ! -f build/CMakeCache.txt ]; then
  cmake -S . -B build -DTESSERA_NATIVE=ON -DTESSERA_BUILD_TESTS=OFF -DTESSERA_BUILD_BENCH=OFF >/dev/null
fi
cmake --build build -j "$(nproc)" --target tessera
port=8080
prev=
for a in "$@"; do
  [ "$prev" = --port ] && port=$a
  prev=$a
done
echo "run: try" >&2
echo "  curl -s http://127.0.0.1:$port/v1/completions -H 'Content-Type: application/json' \\" >&2
echo "       -d '{\"prompt\": \"Once upon a time\", \"max_tokens\": 64, \"temperature\": 0}'" >&2
cd "$caller"
exec "$repo/build/tessera" serve --model-dir "$repo/models" "$@"
