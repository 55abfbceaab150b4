#!/usr/bin/env bash
# Installs what is missing, then builds and runs every test: the normal build and the
# sanitizer build (ASan + UBSan) run the same ctest suite.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh

jobs=$(nproc)
echo "== normal build"
scripts/build.sh build
(cd build && ctest --output-on-failure -j "$jobs")

echo "== sanitizer build (ASan + UBSan)"
scripts/build.sh build-asan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTESSERA_SANITIZE=ON -DTESSERA_BUILD_BENCH=OFF
# OpenMP's runtime keeps its thread pool alive at exit; that is not our leak.
export LSAN_OPTIONS="suppressions=$PWD/tests/lsan.supp:print_suppressions=0"
export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
(cd build-asan && ctest --output-on-failure -j "$jobs")
