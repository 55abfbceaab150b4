#!/usr/bin/env bash
# Soak test of `tessera serve`: 64 concurrent clients for N minutes against a KV pool of
# 20 blocks (preemption), then the fault-injection phase; prints a summary and exits
# non-zero on any failed check. Loopback only; stops by itself.
# usage: scripts/soak.sh [--minutes N] [--rss-tolerance PCT] [--binary PATH] [--no-faults]
#   --binary build-asan/tessera also checks LeakSanitizer's verdict at shutdown.
set -euo pipefail
cd "$(dirname "$0")/.."
minutes=5 tolerance=10 binary=build/tessera faults=--faults
while (($#)); do
  case $1 in
    --minutes) minutes=$2; shift 2 ;;
    --rss-tolerance) tolerance=$2; shift 2 ;;
    --binary) binary=$2; shift 2 ;;
    --no-faults) faults=""; shift ;;
    *) echo "usage: scripts/soak.sh [--minutes N] [--rss-tolerance PCT] [--binary PATH] [--no-faults]" >&2; exit 2 ;;
  esac
done
extra=()
if nm "$binary" 2>/dev/null | grep -q __asan_init; then
  extra+=(--asan)
fi
seconds=$(awk "BEGIN { print $minutes * 60 }")
exec python3 tests/soak/soak.py --binary "$binary" --seconds "$seconds" \
  --rss-tolerance "$tolerance" "${extra[@]}" $faults
