#!/usr/bin/env bash
# Configures and builds one build directory: scripts/build.sh DIR [cmake options...]
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-build}
shift || true
# Tests and benchmarks on unless the options say otherwise: scripts/run.sh may have
# configured this directory without them.
cmake -S . -B "$dir" -DTESSERA_NATIVE=ON -DTESSERA_BUILD_TESTS=ON -DTESSERA_BUILD_BENCH=ON "$@" >/dev/null
cmake --build "$dir" -j "$(nproc)"
