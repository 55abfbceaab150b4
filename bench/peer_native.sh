#!/usr/bin/env bash
# bench/peer_native.sh: builds the llama.cpp peer's llama-batched-bench from its source
# tarball for this machine (-DGGML_NATIVE=ON: its AMX kernels where the CPU has them,
# 1.5-2x its portable binary in prefill and batched decode of 8B models), so that a run can
# take the better of the two peers. Needs cmake and a C and C++ compiler; nothing else.
#
# usage: bench/peer_native.sh SRC.tar.xz DIR
#   SRC.tar.xz  ../shared/peers/llama.cpp-3f545be-src.tar.xz, or ik_llama.cpp's source
#               (../shared/peers/ik_llama.cpp-8337e4c-src.tar.xz: its llama-batched-bench
#               is among its examples, which are then built)
#   DIR         where llama-batched-bench goes (created); the build folder is DIR/build
set -euo pipefail
case ${1:-} in -h|--help|"") sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;; esac
src=$1
dir=${2:?peer_native.sh: DIR is required}
mkdir -p "$dir/src"
tar xJf "$src" -C "$dir/src"
top=$(find "$dir/src" -maxdepth 2 -name CMakeLists.txt -printf '%h\n' | head -1)
examples=OFF
[[ -d $top/examples/batched-bench ]] && examples=ON # ik_llama.cpp; llama.cpp has it in tools/
cmake -S "$top" -B "$dir/build" -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON -DLLAMA_CURL=OFF \
  -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=$examples -DLLAMA_BUILD_SERVER=OFF \
  -DLLAMA_BUILD_UI=OFF -DLLAMA_BUILD_APP=OFF -DBUILD_SHARED_LIBS=OFF >"$dir/cmake.log" 2>&1 ||
  { tail -20 "$dir/cmake.log" >&2; exit 1; }
cmake --build "$dir/build" -j "$(nproc)" --target llama-batched-bench >"$dir/build.log" 2>&1 ||
  { tail -20 "$dir/build.log" >&2; exit 1; }
cp "$(find "$dir/build" -name llama-batched-bench -type f -perm -u+x | head -1)" "$dir/"
grep -o 'AMX[A-Z_]*\|AVX512[A-Z_]*' "$dir/cmake.log" | sort -u | tr '\n' ' ' >&2 || true
echo "peer_native.sh: $dir/llama-batched-bench" >&2
