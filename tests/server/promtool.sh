#!/usr/bin/env bash
# promtool.sh TESSERA MODEL: `promtool check metrics` on a live server's /metrics after one
# completion. scripts/setup.sh installs promtool (the binary alone, from Debian's
# prometheus package); exit 77 (skipped) where it could not.
set -euo pipefail
tessera=$1 model=$2
if ! command -v promtool >/dev/null; then
  echo "skip: promtool is not installed (Debian package prometheus)"
  exit 77
fi
tmp=$(mktemp -d)
pid=
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; rm -rf "$tmp"' EXIT
"$tessera" serve -m "$model" --port 0 2>"$tmp/log" &
pid=$!
port=
for _ in $(seq 100); do
  port=$(sed -n 's#.*listening on http://127.0.0.1:\([0-9]*\).*#\1#p' "$tmp/log" 2>/dev/null || true)
  [ -n "$port" ] && break
  sleep 0.1
done
[ -n "$port" ] || { echo "FAIL serve did not start: $(cat "$tmp/log")"; exit 1; }
curl -sf "http://127.0.0.1:$port/v1/completions" -H 'Content-Type: application/json' \
  -d '{"prompt": "Once", "max_tokens": 4}' >/dev/null
curl -sf "http://127.0.0.1:$port/metrics" >"$tmp/metrics"
if ! out=$(promtool check metrics <"$tmp/metrics" 2>&1); then
  echo "FAIL promtool check metrics: $out"
  exit 1
fi
echo "ok   promtool check metrics: $(grep -c '^# TYPE' "$tmp/metrics") families, no findings"
