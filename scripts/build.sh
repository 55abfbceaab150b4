#!/usr/bin/env bash
# Configures and builds one build directory: scripts/build.sh DIR [cmake options...]
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-build}
shift || true
cmake -S . -B "$dir" -DTESSERA_NATIVE=ON "$@" >/dev/null
cmake --build "$dir" -j "$(nproc)"
