#!/usr/bin/env bash
# Installs what is missing, then builds and runs every test: the normal build and the
# sanitizer build (ASan + UBSan) run the same ctest suite, a ThreadSanitizer build runs
# the engine and server tests, and the kernel tests also run as aarch64 NEON programs
# under qemu-user, and every libFuzzer target runs for a short while.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh --cross-aarch64

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

echo "== thread sanitizer build (engine scheduling and server tests)"
scripts/build.sh build-tsan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTESSERA_TSAN=ON -DTESSERA_BUILD_BENCH=OFF
(cd build-tsan && TSAN_OPTIONS="halt_on_error=1:allocator_may_return_null=1" \
   ctest --output-on-failure -j "$jobs" -R "engine_sched|server")

# The kernel checks build without cmocka (TS_SIMD_STANDALONE); the exit status is the verdict.
echo "== aarch64 NEON kernels (cross-compiled, run under qemu-user)"
mkdir -p build-aarch64
cc_arm=(aarch64-linux-gnu-gcc -std=c11 -O2 -static -Wall -Wextra -Wshadow -Wstrict-prototypes
        -Wmissing-prototypes -Wvla -D_GNU_SOURCE -DTS_HAVE_NEON -DTS_SIMD_STANDALONE -Isimd -Iinclude)
# ref.c stays scalar, as in simd/CMakeLists.txt (it must equal llama2.c bit for bit)
"${cc_arm[@]}" -fno-tree-vectorize -c simd/ref/ref.c -o build-aarch64/ref.o
ref_rest=$(ls simd/ref/*.c | grep -v '/ref\.c$')
for t in test_simd test_simd_attention test_simd_gemm test_simd_qgemm test_simd_amx; do
  # shellcheck disable=SC2086
  "${cc_arm[@]}" simd/*.c $ref_rest build-aarch64/ref.o simd/neon/*.c "tests/$t.c" -lm \
    -o "build-aarch64/$t"
  qemu-aarch64 "build-aarch64/$t"
done
# the quantized GEMM once more with sdot (dotprod), which qemu's default CPU has
# shellcheck disable=SC2086
"${cc_arm[@]}" -march=armv8.2-a+dotprod simd/*.c $ref_rest build-aarch64/ref.o simd/neon/*.c \
  tests/test_simd_qgemm.c -lm -o build-aarch64/test_simd_qgemm_dotprod
qemu-aarch64 build-aarch64/test_simd_qgemm_dotprod

echo "== fuzz smoke (libFuzzer, 20 s per target)"
scripts/fuzz.sh 20
