#!/usr/bin/env bash
# package.sh [--allow-native] BUILD_DIR [OUT_DIR]: a Debian package of a built tree, from its `cmake
# --install` into /usr: the binary, the built-in model and its licence, the manual page,
# the docs, the example config and the systemd unit (in /usr/share/tessera/, enabled by
# nobody: it needs /etc/tessera/ first, see the unit's header). Depends comes from
# dpkg-shlibdeps, so `apt-get install ./tessera_VERSION_ARCH.deb` on Debian 12 pulls the
# libraries the binary links (OpenBLAS's OpenMP build, cJSON, libmicrohttpd, libcurl).
# Prints the package's path. Needs dpkg-deb and dpkg-shlibdeps (Debian's dpkg-dev).
# A build configured with TESSERA_NATIVE (-march=native: it runs only on CPUs like the
# build machine's) or a sanitizer is refused; --allow-native packages a native build anyway,
# for a package that stays on this machine (the tests).
set -euo pipefail
allow_native=0
[ "${1:-}" = --allow-native ] && { allow_native=1; shift; }
[ $# -ge 1 ] || { sed -n '2,11s/^# \{0,1\}//p' "$0"; exit 2; }
build=$(cd "$1" && pwd)
out=$(mkdir -p "${2:-$build}" && cd "${2:-$build}" && pwd)
for tool in dpkg-deb dpkg-shlibdeps; do
  command -v "$tool" >/dev/null || { echo "package: $tool is not installed (apt-get install dpkg-dev)" >&2; exit 2; }
done
version=$(sed -n 's/^CMAKE_PROJECT_VERSION:STATIC=//p' "$build/CMakeCache.txt")
[ -n "$version" ] || { echo "package: $build is not a configured build" >&2; exit 2; }
# A package runs on other machines: a -march=native or sanitizer build would not.
for opt in TESSERA_NATIVE TESSERA_SANITIZE TESSERA_TSAN; do
  [ "$opt" = TESSERA_NATIVE ] && ((allow_native)) && continue
  if grep -q "^$opt:BOOL=ON$" "$build/CMakeCache.txt"; then
    echo "package: $build was configured with $opt=ON; configure a build without it to package" >&2
    exit 2
  fi
done
arch=$(dpkg --print-architecture)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
root=$work/root
DESTDIR=$root cmake --install "$build" --prefix /usr >/dev/null
strip --strip-unneeded "$root/usr/bin/tessera"
gzip -9n "$root/usr/share/man/man1/tessera.1"

# dpkg-shlibdeps reads debian/control from the directory it runs in.
mkdir -p "$work/debian" "$root/DEBIAN"
printf 'Source: tessera\n\nPackage: tessera\nArchitecture: any\n' >"$work/debian/control"
depends=$(cd "$work" && dpkg-shlibdeps -O "root/usr/bin/tessera" 2>/dev/null |
          sed -n 's/^shlibs:Depends=//p')
[ -n "$depends" ] || { echo "package: dpkg-shlibdeps found no dependencies" >&2; exit 1; }
# The binary's RUNPATH names OpenBLAS's OpenMP build (CMakeLists.txt says why), which
# dpkg-shlibdeps reports as the virtual libopenblas0: ask for that build by name.
depends=$(sed -E 's/libopenblas0( \([^)]*\))?(,|$)/libopenblas0-openmp\2/' <<<"$depends")
size=$(du -sk --exclude=DEBIAN "$root" | cut -f1)
cat >"$root/DEBIAN/control" <<CONTROL
Package: tessera
Version: $version
Architecture: $arch
Maintainer: tessera developers <tessera@localhost>
Installed-Size: $size
Depends: $depends
Section: net
Priority: optional
Description: OpenAI-compatible LLM inference server for CPUs
 tessera serves Llama-family models (and Qwen, Gemma, Phi-3, Mixtral) from GGUF
 files over an OpenAI-compatible HTTP API, batching many clients into each step
 on the CPU. The package holds the tessera binary, a tiny built-in model
 (stories260K) to try it with, the manual page, docs, an example config and a
 systemd unit in /usr/share/tessera/.
CONTROL
(cd "$root" && find usr -type f -exec md5sum {} + | sort -k2) >"$root/DEBIAN/md5sums"
deb=$out/tessera_${version}_${arch}.deb
dpkg-deb --root-owner-group -Zxz --build "$root" "$deb" >/dev/null
echo "$deb"
