#!/usr/bin/env bash
# Installs what tessera needs to build and test on Debian 12, if it is missing.
# Idempotent and non-interactive; safe to run before every build.
# --serve installs only what building and running the tessera binary needs (scripts/run.sh);
# without it, what the tests need too. --cross-aarch64 also installs the aarch64 cross
# compiler and qemu-user, with which scripts/test.sh runs the NEON kernel tests. --fuzz
# installs clang and the sanitizer and libFuzzer runtimes that scripts/fuzz.sh builds with.
set -euo pipefail

packages=(build-essential cmake pkg-config
          libopenblas-openmp-dev libopenblas0-openmp
          libcjson-dev libmicrohttpd-dev libcurl4-openssl-dev ${TESSERA_EXTRA_PACKAGES:-})
test_packages=(libcmocka-dev curl jq python3
               chromium     # tests only: the chat page's browser test (tests/web/)
               nginx-light  # tests only: scripts/cluster.sh's test (tests/cluster/)
               systemd)     # tests only: systemd-analyze verify of the unit (tests/install/)
serve_only=0
for arg in "$@"; do
  case $arg in
    --serve) serve_only=1 ;;
    --cross-aarch64) packages+=(gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user) ;;
    --fuzz) packages+=(clang libclang-rt-14-dev libomp-14-dev) ;;
    *) echo "setup: unknown option $arg" >&2; exit 2 ;;
  esac
done

missing=()
if ((!serve_only)); then
  packages+=("${test_packages[@]}")
  # The HTTP tests drive the server with the official OpenAI Node client.
  command -v node >/dev/null && command -v npm >/dev/null || missing+=(nodejs npm)
fi
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$p")
  fi
done

sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}" >&2
  $sudo apt-get update -qq
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
fi

# promtool, for the /metrics lint (tests/server/promtool.sh): the one binary taken out of
# Debian's prometheus package, whose install would also bring and start the server.
if ((!serve_only)) && ! command -v promtool >/dev/null; then
  tmp=$(mktemp -d)
  echo "setup: installing promtool (from Debian's prometheus package)" >&2
  if (cd "$tmp" && { apt-get download prometheus >/dev/null 2>&1 ||
                     { $sudo apt-get update -qq && apt-get download prometheus >/dev/null; }; } &&
      dpkg -x prometheus_*.deb x); then
    $sudo install -m 755 "$tmp/x/usr/bin/promtool" /usr/local/bin/promtool
  else
    echo "setup: could not fetch prometheus; the promtool test will skip" >&2
  fi
  rm -rf "$tmp"
fi
