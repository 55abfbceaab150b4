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

# The sanitizer builds carry line tables only (-g1): their reports keep file:line, and they
# compile a fifth faster than with full debug information.
sanitized=(-DCMAKE_BUILD_TYPE=RelWithDebInfo "-DCMAKE_C_FLAGS_RELWITHDEBINFO=-O2 -g1 -DNDEBUG"
           -DTESSERA_BUILD_BENCH=OFF)

echo "== sanitizer build (ASan + UBSan)"
scripts/build.sh build-asan "${sanitized[@]}" -DTESSERA_SANITIZE=ON
# OpenMP's runtime keeps its thread pool alive at exit; that is not our leak.
export LSAN_OPTIONS="suppressions=$PWD/tests/lsan.supp:print_suppressions=0"
export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
(cd build-asan && ctest --output-on-failure -j "$jobs")

echo "== thread sanitizer build (engine scheduling and server tests)"
# Only what those tests run is built: the binary (the server_* scripts') and the
# test_engine_sched and test_server_* programs, not the sixty other test programs.
tsan_run="engine_sched|server"
tsan_targets=(tessera $(cd tests && ls test_*.c | sed -n 's/\.c$//p' | grep -E "$tsan_run"))
cmake -S . -B build-tsan -DTESSERA_NATIVE=ON -DTESSERA_BUILD_TESTS=ON "${sanitized[@]}" \
  -DTESSERA_TSAN=ON >/dev/null
cmake --build build-tsan -j "$jobs" --target "${tsan_targets[@]}"
(cd build-tsan && TSAN_OPTIONS="halt_on_error=1:allocator_may_return_null=1" \
   ctest --output-on-failure -j "$jobs" -R "$tsan_run")

# The kernel checks build without cmocka (TS_SIMD_STANDALONE); the exit status is the verdict.
echo "== aarch64 NEON kernels (cross-compiled, run under qemu-user)"
arm=build-aarch64
mkdir -p "$arm/plain" "$arm/dotprod"
cc_arm=(aarch64-linux-gnu-gcc -std=c11 -O2 -static -Wall -Wextra -Wshadow -Wstrict-prototypes
        -Wmissing-prototypes -Wvla -D_GNU_SOURCE -DTS_HAVE_NEON -DTS_SIMD_STANDALONE -Isimd -Iinclude)
# The kernels compile once per CPU flavour into DIR (all at once; any failure stops the
# script), and every test program links them: compile_kernels DIR [flags...]
compile_kernels() {
  local dir=$1 src pids=()
  shift
  # ref.c stays scalar, as in simd/CMakeLists.txt (it must equal llama2.c bit for bit)
  "${cc_arm[@]}" "$@" -fno-tree-vectorize -c simd/ref/ref.c -o "$dir/ref.o" & pids+=($!)
  for src in simd/*.c simd/ref/*.c simd/neon/*.c; do
    [ "$src" = simd/ref/ref.c ] && continue
    "${cc_arm[@]}" "$@" -c "$src" -o "$dir/$(echo "${src%.c}" | tr / _).o" & pids+=($!)
  done
  for pid in "${pids[@]}"; do wait "$pid"; done
}
compile_kernels "$arm/plain"
for t in test_simd test_simd_attention test_simd_gemm test_simd_qgemm test_simd_amx; do
  "${cc_arm[@]}" "$arm"/plain/*.o "tests/$t.c" -lm -o "$arm/$t"
  qemu-aarch64 "$arm/$t"
done
# the quantized GEMM once more with sdot (dotprod), which qemu's default CPU has
compile_kernels "$arm/dotprod" -march=armv8.2-a+dotprod
"${cc_arm[@]}" -march=armv8.2-a+dotprod "$arm"/dotprod/*.o tests/test_simd_qgemm.c -lm \
  -o "$arm/test_simd_qgemm_dotprod"
qemu-aarch64 "$arm/test_simd_qgemm_dotprod"

echo "== fuzz smoke (libFuzzer, 20 s per target)"
scripts/fuzz.sh 20
