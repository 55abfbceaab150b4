#!/usr/bin/env bash
# bench/compare_peer.sh: the same HTTP load against `tessera serve` and llama-server (the
# llama.cpp peer) on the same GGUF with the same threads, one server at a time: `tessera
# loadgen --stream` at each concurrency level, then both side by side (tok/s, TTFT, ITL,
# errors and each server's deviations from OpenAI's stream format). Raw responses of failed
# and deviating requests are kept. bench/plot.sh OUT draws both curves.
#
# usage: bench/compare_peer.sh --peer DIR [-m MODEL] [--threads T] [--levels LIST]
#                              [--requests N] [--prompt-len L] [--max-tokens M]
#                              [--build DIR] [-o OUT] [--chat]
#   --peer DIR   a folder with llama-server (e.g. the unpacked llama.cpp-3f545be.tar.xz)
#   -m MODEL     the GGUF both serve (default: a synthetic stories110m, written once)
#   defaults: all cores, levels 1,4,16,64, 64 requests per level, prompt 64 words,
#   64 tokens, build/, results in build/compare-peer/ (peer-tessera.json,
#   peer-llama.json, peer-summary.md, streams-*/ and streams.tar.gz, the servers' logs).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=$root/build
peer=""
model=""
threads=$(nproc)
levels=1,4,16,64
requests=64
prompt_len=64
max_tokens=64
out=""
chat=()
while (($#)); do
  case $1 in
    --peer) peer=$2; shift 2 ;;
    -m) model=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --levels) levels=$2; shift 2 ;;
    --requests) requests=$2; shift 2 ;;
    --prompt-len) prompt_len=$2; shift 2 ;;
    --max-tokens) max_tokens=$2; shift 2 ;;
    --build) build=$2; shift 2 ;;
    -o) out=$2; shift 2 ;;
    --chat) chat=(--chat); shift ;;
    -h|--help) sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "compare_peer.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
tessera=$build/tessera
out=${out:-$build/compare-peer}
[ -x "$tessera" ] || { echo "compare_peer.sh: no $tessera" >&2; exit 2; }
[ -n "$peer" ] && [ -x "$peer/llama-server" ] ||
  { echo "compare_peer.sh: --peer must name a folder with llama-server" >&2; exit 2; }
[[ $levels =~ ^[0-9]+(,[0-9]+)*$ ]] || { echo "compare_peer.sh: --levels wants 1,4,16" >&2; exit 2; }
command -v python3 >/dev/null || { echo "compare_peer.sh: needs python3" >&2; exit 2; }
mkdir -p "$out"
max_level=$(tr ',' '\n' <<<"$levels" | sort -n | tail -1)
if [ -z "$model" ]; then
  model=$build/stories110m-synth.gguf
  [ -f "$model" ] || "$tessera" synth --shape stories110m -o "$model" >&2
fi

pid=""
stop() {
  if [ -n "$pid" ]; then
    kill -TERM "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
    pid=""
  fi
}
trap stop EXIT
trap 'stop; exit 130' INT TERM
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
# Waits until URL/health answers 200 (llama-server answers 503 while it loads); python's
# urllib, as a measurement machine may have no curl.
healthy() {
  python3 -c 'import sys, urllib.request
try: sys.exit(0 if urllib.request.urlopen(sys.argv[1] + "/health", timeout=2).status == 200 else 1)
except Exception: sys.exit(1)' "$1"
}
wait_up() {
  local url=$1 log=$2
  for _ in $(seq 1 1200); do
    healthy "$url" && return 0
    kill -0 "$pid" 2>/dev/null || { tail -20 "$log" >&2; echo "compare_peer.sh: the server exited" >&2; return 1; }
    sleep 0.1
  done
  echo "compare_peer.sh: $url did not come up in 120 s" >&2
  return 1
}
load() { # load NAME URL
  echo "compare_peer.sh: loadgen against $1, levels $levels, $requests requests each" >&2
  "$tessera" loadgen --url "$2" --stream "${chat[@]}" --concurrency "$levels" \
    --requests "$requests" --prompt-len "$prompt_len" --max-tokens "$max_tokens" \
    --timeout 600 --deadline 3000 --json "$out/peer-$1.json" --save-streams "$out/streams-$1" \
    | tee "$out/loadgen-$1.txt" || echo "compare_peer.sh: $1: some requests failed" >&2
}

# tessera: room for every stream at once.
port=$(free_port)
OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive} "$tessera" serve -m "$model" --host 127.0.0.1 \
  --port "$port" --threads "$threads" --max-seqs "$max_level" --grace 1 2>"$out/tessera-serve.log" &
pid=$!
wait_up "http://127.0.0.1:$port" "$out/tessera-serve.log"
load tessera "http://127.0.0.1:$port"
stop

# llama-server: one slot per stream, each with room for its prompt and tokens.
port=$(free_port)
ctx=$(((2 * prompt_len + max_tokens + 64) * max_level))
"$peer/llama-server" -m "$model" --host 127.0.0.1 --port "$port" -t "$threads" -tb "$threads" \
  -np "$max_level" -c "$ctx" >"$out/llama-server.log" 2>&1 &
pid=$!
wait_up "http://127.0.0.1:$port" "$out/llama-server.log"
load llama "http://127.0.0.1:$port"
stop

python3 - "$out" "$model" "$threads" <<'EOF' | tee "$out/peer-summary.md"
import json, os, sys
out, model, threads = sys.argv[1:4]
runs = {}
for name in ("tessera", "llama"):
    try:
        runs[name] = {l["concurrency"]: l for l in json.load(open(f"{out}/peer-{name}.json"))["levels"]}
    except (OSError, ValueError, KeyError):
        runs[name] = {}

def num(x, f="{:.1f}"):
    return f.format(x) if isinstance(x, (int, float)) else "-"

def pct(l, key, p):
    return (l.get(key) or {}).get(p) if l else None

print(f"{os.path.basename(model)}, {threads} threads each, loadgen --stream\n")
print("| streams | tessera tok/s | llama.cpp tok/s | ratio | TTFT p50 ms t / l "
      "| ITL p50 ms t / l | ITL p99 ms t / l | ok t / l |")
print("|---|---|---|---|---|---|---|---|")
for c in sorted(set(runs["tessera"]) | set(runs["llama"])):
    t, l = runs["tessera"].get(c), runs["llama"].get(c)
    ts, ls = t and t["output_tok_s"], l and l["output_tok_s"]
    ratio = f"{ts / ls:.2f}x" if ts and ls else "-"
    print(f"| {c} | {num(ts)} | {num(ls)} | {ratio} "
          f"| {num(pct(t, 'ttft_ms', 'p50'), '{:.0f}')} / {num(pct(l, 'ttft_ms', 'p50'), '{:.0f}')} "
          f"| {num(pct(t, 'itl_ms', 'p50'))} / {num(pct(l, 'itl_ms', 'p50'))} "
          f"| {num(pct(t, 'itl_ms', 'p99'))} / {num(pct(l, 'itl_ms', 'p99'))} "
          f"| {t['ok'] if t else '-'}/{t['sent'] if t else '-'} / {l['ok'] if l else '-'}/{l['sent'] if l else '-'} |")
print()
for name, label in (("tessera", "tessera"), ("llama", "llama.cpp")):
    for c, l in sorted(runs[name].items()):
        bits = []
        if l.get("errors"):
            bits.append("errors " + ", ".join(f"{k} {v}" for k, v in l["errors"].items()))
        if l.get("deviations"):
            bits.append("deviations " + ", ".join(f"{k} {v}" for k, v in l["deviations"].items()))
        if l.get("extra_fields"):
            bits.append("extra fields " + ", ".join(l["extra_fields"]))
        if l.get("error_sample"):
            bits.append(f"first error event: {l['error_sample']}")
        if bits:
            print(f"- {label} at {c} streams: " + "; ".join(bits))
EOF
# The raw streams also as one file, for hosts that send back only a few files.
tar czf "$out/streams.tar.gz" -C "$out" streams-tessera streams-llama 2>/dev/null || true
echo "results in $out (bench/plot.sh $out draws them)"
