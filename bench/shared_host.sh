#!/usr/bin/env bash
# shared_host.sh: how `tessera serve` degrades beside a busy core. Serves the built-in
# stories260K (default threads, the environment as given), runs `tessera loadgen
# --concurrency 4` quiet, then again with one CPU hog (`yes > /dev/null`) beside it, and
# prints req/s of each round, their ratio, and the medians over the rounds. Loopback only; stops what it starts.
#   bench/shared_host.sh [--build DIR] [--requests N] [--rounds R] [-- SERVE_ARGS...]
set -euo pipefail
cd "$(dirname "$0")/.."
build=build requests=64 rounds=3
while (($#)); do
  case $1 in
    --build) build=$2; shift 2 ;;
    --requests) requests=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --) shift; break ;;
    *) echo "usage: bench/shared_host.sh [--build DIR] [--requests N] [--rounds R] [-- SERVE_ARGS...]" >&2; exit 2 ;;
  esac
done
tmp=$(mktemp -d)
server= hog=
cleanup() {
  [ -n "$hog" ] && kill "$hog" 2>/dev/null
  [ -n "$server" ] && kill "$server" 2>/dev/null
  rm -rf "$tmp"
}
trap cleanup EXIT
"$build/tessera" serve --port 0 "$@" 2>"$tmp/serve.log" &
server=$!
port=
for _ in $(seq 200); do
  port=$(sed -n 's#.*listening on http://127.0.0.1:\([0-9]*\).*#\1#p' "$tmp/serve.log" 2>/dev/null || true)
  [ -n "$port" ] && break
  sleep 0.1
done
[ -n "$port" ] || { cat "$tmp/serve.log" >&2; exit 1; }
grep -E "threads|wait" "$tmp/serve.log" >&2 || true
# req/s of one loadgen run at concurrency 4
rate() {
  "$build/tessera" loadgen --url "http://127.0.0.1:$port" --concurrency 4 --requests "$requests" \
    --prompt-len 32 --max-tokens 32 --json "$tmp/lg.json" >/dev/null 2>&1 || true
  python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print("%.1f" % d["levels"][0]["req_s"])' "$tmp/lg.json"
}
rate >/dev/null # warm-up
qs=() bs=()
for r in $(seq "$rounds"); do
  quiet=$(rate)
  yes >/dev/null &
  hog=$!
  sleep 0.5
  busy=$(rate)
  kill "$hog"
  wait "$hog" 2>/dev/null || true
  hog=
  echo "round $r: quiet $quiet req/s, with a hog $busy req/s ($(python3 -c "print('%.0f%%' % (100 * $busy / $quiet))"))"
  qs+=("$quiet") bs+=("$busy")
done
python3 - "${qs[*]}" "${bs[*]}" <<'PY'
import statistics, sys
q = statistics.median(float(x) for x in sys.argv[1].split())
b = statistics.median(float(x) for x in sys.argv[2].split())
print("median: quiet %.1f req/s, with a hog %.1f req/s (%.0f%%)" % (q, b, 100 * b / q))
PY
