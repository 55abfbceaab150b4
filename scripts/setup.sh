#!/usr/bin/env bash
# Installs what tessera needs to build and test on Debian 12, if it is missing.
# Idempotent and non-interactive; safe to run before every build.
set -euo pipefail

packages=(build-essential cmake pkg-config
          libopenblas-openmp-dev libopenblas0-openmp
          libcjson-dev libmicrohttpd-dev libcmocka-dev
          curl ${TESSERA_EXTRA_PACKAGES:-})

missing=()
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
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
fi
