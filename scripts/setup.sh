#!/usr/bin/env bash
# Installs what tessera needs to build and test on Debian 12, if it is missing.
# Idempotent and non-interactive; safe to run before every build.
# --cross-aarch64 also installs the aarch64 cross compiler and qemu-user, with which
# scripts/test.sh runs the NEON kernel tests. --fuzz installs clang and the sanitizer
# and libFuzzer runtimes that scripts/fuzz.sh builds with.
set -euo pipefail

packages=(build-essential cmake pkg-config
          libopenblas-openmp-dev libopenblas0-openmp
          libcjson-dev libmicrohttpd-dev libcmocka-dev libcurl4-openssl-dev
          curl jq python3
          chromium     # tests only: the chat page's browser test (tests/web/)
          nginx-light  # tests only: scripts/cluster.sh's test (tests/cluster/)
          ${TESSERA_EXTRA_PACKAGES:-})
for arg in "$@"; do
  case $arg in
    --cross-aarch64) packages+=(gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user) ;;
    --fuzz) packages+=(clang libclang-rt-14-dev libomp-14-dev) ;;
    *) echo "setup: unknown option $arg" >&2; exit 2 ;;
  esac
done

missing=()
# The HTTP tests drive the server with the official OpenAI Node client.
command -v node >/dev/null && command -v npm >/dev/null || missing+=(nodejs npm)
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$p")
  fi
done

if ((${#missing[@]})); then
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  echo "setup: installing ${missing[*]}" >&2
  $sudo apt-get update -qq
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
fi
