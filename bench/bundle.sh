#!/usr/bin/env bash
# bench/bundle.sh: builds tessera, its benchmarks and kernel tests for another machine and
# gathers them with every shared library they load (glibc's own excepted) into one folder,
# so the benchmarks run on a host that has none of our build dependencies (no OpenBLAS,
# cJSON, libmicrohttpd or libcurl, no package registry). The host needs a glibc at least
# as new as this machine's. The bundle is one compressed archive, bundle.tar.xz; on the
# host: `tar xJf DIR/bundle.tar.xz -C X; export LD_LIBRARY_PATH=X/lib` and run X/bin/*.
#
# usage: bench/bundle.sh [--out DIR] [--march ARCH] [--peer TARBALL]
#   --out DIR      where the bundle goes (default .deps/host, which git ignores)
#   --march ARCH   the host's -march for the non-kernel code (default sapphirerapids; the
#                  kernels pick their instruction set at run time either way)
#   --peer FILE    also copy this llama.cpp peer tarball into the bundle
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=$root/.deps/host
march=sapphirerapids
peer=""
while (($#)); do
  case $1 in
    --out) out=$2; shift 2 ;;
    --march) march=$2; shift 2 ;;
    --peer) peer=$2; shift 2 ;;
    -h|--help) sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "bundle.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
build=$root/build-host
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DTESSERA_NATIVE=OFF \
  -DCMAKE_C_FLAGS="-march=$march" -DTESSERA_BUILD_TESTS=ON -DTESSERA_BUILD_BENCH=ON >/dev/null
programs=(tessera bench_cores bench_qgemm bench_qpack bench_amx_parts bench_layers bench_gemm bench_kernels test_simd_qgemm test_simd_amx
          test_model_amx test_model_quant test_embed_encoder)
cmake --build "$build" -j "$(nproc)" --target "${programs[@]}" >/dev/null
rm -rf "$out"
mkdir -p "$out/bin" "$out/lib"
for p in "${programs[@]}"; do
  cp "$build/$p" "$out/bin/"
done
# Every library the programs load but glibc's (the host brings its own, newer glibc).
for p in "${programs[@]}"; do
  ldd "$build/$p" | awk '/=> \// {print $3}'
done | sort -u | while read -r lib; do
  case $(basename "$lib") in
    libc.so*|libm.so*|libpthread.so*|libdl.so*|librt.so*|libresolv.so*|ld-linux*) ;;
    *) cp -L "$lib" "$out/lib/" ;;
  esac
done
tar cJf "$out.tar.xz" -C "$out" bin lib
rm -rf "$out"
mkdir -p "$out"
mv "$out.tar.xz" "$out/bundle.tar.xz"
[ -z "$peer" ] || cp "$peer" "$out/"
echo "bundle.sh: $(du -sh "$out" | cut -f1) in $out"
