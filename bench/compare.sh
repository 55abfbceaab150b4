#!/usr/bin/env bash
# bench/compare.sh: the single-request baseline against batched serving, end to end, in one
# run: `tessera serve` on a synthetic stories110m (loopback, a free port), `tessera loadgen`
# sequentially and at N concurrent streams, `tessera bench` in process at the same levels,
# and a mixed-priority load past saturation. Prints the batching speedup over HTTP and the
# server's overhead (HTTP tok/s / in-process tok/s at N), and writes every JSON result into
# a directory for bench/plot.sh.
#
# usage: bench/compare.sh [-n N] [-o DIR] [-m MODEL] [--prompt-len L] [--max-tokens M]
#                         [--levels LIST] [--build DIR] [--cluster [--replicas R]]
#                         [--peer LLAMA_CPP_DIR [--threads T]]
# --cluster instead measures replicas behind nginx (bench/cluster_bench.sh, 1..R replicas
# each on its own cores, N streams per replica). --peer instead runs the same loadgen levels
# against tessera serve and llama-server on the same GGUF and threads (bench/compare_peer.sh,
# N requests per level).
# Defaults fit 10 minutes on 2 cores: N 16, prompt 32 tokens, 64 generated tokens,
# levels 1,2,4,8,N, results in build/compare/.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
. "$root/bench/lib_args.sh" # -n -o -m --prompt-len --max-tokens --replicas --build --help
levels=""
cluster=0
peer=""
threads=$(nproc)
while (($#)); do
  case $1 in
    --levels) levels=$2; shift 2 ;;
    --cluster) cluster=1; shift ;;
    --peer) peer=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    *) bench_option 2,17 "$@"; shift "$bench_used" ;;
  esac
done
[[ $conc =~ ^[0-9]+$ ]] && ((conc >= 2 && conc <= 256)) || { echo "compare.sh: -n wants 2..256" >&2; exit 2; }
out=${out:-$build/compare}
if ((cluster)); then
  exec "$root/bench/cluster_bench.sh" -n "$conc" -o "$out/cluster" --prompt-len "$prompt_len" \
    --max-tokens "$max_tokens" --replicas "$replicas" --build "$build" ${model:+-m "$model"}
fi
levels=${levels:-$(for l in 1 2 4 8; do if ((l < conc)); then printf '%s,' "$l"; fi; done)$conc}
if [ -n "$peer" ]; then
  exec "$root/bench/compare_peer.sh" --peer "$peer" --threads "$threads" --levels "$levels" \
    --requests "$conc" --prompt-len "$prompt_len" --max-tokens "$max_tokens" --build "$build" \
    -o "$out/peer" ${model:+-m "$model"}
fi
tessera=$build/tessera
model=${model:-$build/stories110m-synth.gguf}
command -v jq >/dev/null || { echo "compare.sh: needs jq (scripts/setup.sh installs it)" >&2; exit 2; }
command -v curl >/dev/null || { echo "compare.sh: needs curl" >&2; exit 2; }
[ -x "$tessera" ] || { echo "compare.sh: no $tessera (scripts/build.sh $build)" >&2; exit 2; }
mkdir -p "$out"
# OpenMP threads of the server and of bench wait passively, so an idle server does not
# spin against the in-process run.
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}

if [ ! -f "$model" ]; then
  echo "compare.sh: writing a synthetic stories110m to $model" >&2
  # The Llama-2 vocabulary where the workplace has it; else synth's built-in default.
  vocab=()
  spm=${TESSERA_SHARED:-../shared}/vocab/ggml-vocab-llama-spm.gguf
  [ -f "$spm" ] && vocab=(--vocab "$spm")
  "$tessera" synth --shape stories110m "${vocab[@]}" -o "$model" >&2
fi

keys=$out/keys.json
cat >"$keys" <<'EOF'
{"sk-compare-high": {"tier": "high", "name": "compare high"},
 "sk-compare-normal": {"tier": "normal", "name": "compare normal"},
 "sk-compare-low": {"tier": "low", "name": "compare low"}}
EOF

# The server: loopback, any free port, one engine with room for N sequences at once.
log=$out/serve.log
server_pid=""
stop_server() {
  if [ -n "$server_pid" ]; then
    kill -TERM "$server_pid" 2>/dev/null || true
    wait "$server_pid" 2>/dev/null || true
    server_pid=""
  fi
}
trap stop_server EXIT
trap 'stop_server; exit 130' INT TERM
"$tessera" serve -m "$model" --host 127.0.0.1 --port 0 --api-keys "$keys" \
  --max-seqs "$conc" --grace 1 2>"$log" &
server_pid=$!
url=""
for _ in $(seq 1 600); do
  url=$(grep -o 'listening on http://[^ ]*' "$log" | head -1 | sed 's/listening on //') || true
  [ -n "$url" ] && break
  kill -0 "$server_pid" 2>/dev/null || { cat "$log" >&2; echo "compare.sh: serve exited" >&2; exit 1; }
  sleep 0.1
done
[ -n "$url" ] || { echo "compare.sh: serve did not start in 60 s" >&2; exit 1; }
curl -sf "$url/health" >/dev/null || { echo "compare.sh: $url/health failed" >&2; exit 1; }
echo "compare.sh: server at $url, model $model" >&2

common=(--url "$url" --api-keys "$keys" --prompt-len "$prompt_len" --max-tokens "$max_tokens"
        --stream --timeout 300 --deadline 400)

# 1. Over HTTP: each level sends N requests with at most that many in flight, so level 1 is
#    the sequential baseline and level N is one wave of N concurrent streams, as in bench.
echo "compare.sh: loadgen, levels $levels, $conc requests each" >&2
"$tessera" loadgen "${common[@]}" --concurrency "$levels" --requests "$conc" \
  --json "$out/http.json" || echo "compare.sh: WARNING: some requests failed (see above)" >&2

# 2. Mixed priorities past saturation: 2N in flight against N decode slots, 3N requests.
echo "compare.sh: loadgen, mixed priorities at $((2 * conc)) in flight" >&2
"$tessera" loadgen "${common[@]}" --concurrency "$((2 * conc))" --requests "$((3 * conc))" \
  --mix high:0.2,normal:0.6,low:0.2 --seed 7 --json "$out/mixed.json" || echo "compare.sh: WARNING: some mixed requests failed" >&2
stop_server

# 3. In process, the same model and levels, with the server gone.
have_bench=0
if "$tessera" bench --help >/dev/null 2>&1; then
  have_bench=1
  echo "compare.sh: tessera bench, levels 1,$conc" >&2
  "$tessera" bench -m "$model" --concurrency "1,$conc" -n "$max_tokens" \
    --prompt-len "$prompt_len" --bw-mem 0 --json "$out/inprocess.json"
else
  echo "compare.sh: this tessera has no bench command: the overhead is not measured" >&2
fi

# Summary.
http_tok() { jq -r --argjson c "$1" '.levels[] | select(.concurrency == $c) | .output_tok_s' "$out/http.json"; }
seq_tps=$(http_tok 1)
bat_tps=$(http_tok "$conc")
speedup=$(jq -n --argjson a "$bat_tps" --argjson b "$seq_tps" 'if $b > 0 then $a / $b else 0 end')
summary=$(jq -n --argjson n "$conc" --argjson seq "$seq_tps" --argjson bat "$bat_tps" \
  --argjson speedup "$speedup" --arg model "$model" --argjson pl "$prompt_len" \
  --argjson mt "$max_tokens" --arg cpu "$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')" \
  --argjson cores "$(nproc)" \
  '{model: $model, prompt_len: $pl, max_tokens: $mt, concurrency: $n, cpu: $cpu, cores: $cores,
    http_sequential_tok_s: $seq, http_batched_tok_s: $bat, speedup: $speedup}')
if ((have_bench)); then
  inproc=$(jq -r --argjson c "$conc" '.levels[] | select(.concurrency == $c) | .e2e_tok_s' "$out/inprocess.json")
  summary=$(jq --argjson ip "$inproc" \
    '. + {inprocess_tok_s: $ip, server_overhead: (if $ip > 0 then .http_batched_tok_s / $ip else 0 end)}' \
    <<<"$summary")
fi
mixed=$(jq '.levels[-1].classes | with_entries(.value |= {sent, ok, failed, ttft_p99_ms: .ttft_ms.p99})' "$out/mixed.json")
summary=$(jq --argjson m "$mixed" '. + {mixed: $m}' <<<"$summary")
echo "$summary" >"$out/summary.json"

echo
echo "== compare: $model, prompt $prompt_len, $max_tokens tokens, $(nproc) cores =="
jq -r '"sequential over HTTP:   \(.http_sequential_tok_s * 10 | round / 10) output tok/s",
       "\(.concurrency) concurrent over HTTP: \(.http_batched_tok_s * 10 | round / 10) output tok/s",
       "speedup (batched / sequential): \(.speedup * 100 | round / 100)x",
       (if .inprocess_tok_s then
          "in process at \(.concurrency):      \(.inprocess_tok_s * 10 | round / 10) output tok/s",
          "server overhead (HTTP / in process at \(.concurrency)): \(.server_overhead * 1000 | round / 1000)"
        else "server overhead: not measured (no tessera bench)" end),
       "mixed load, p99 TTFT ms: " + ([.mixed | to_entries[] | "\(.key) \(.value.ttft_p99_ms // "-" | if type == "number" then (. * 10 | round / 10) else . end) (\(.value.ok)/\(.value.sent) ok)"] | join(", "))' \
  "$out/summary.json"
echo "results in $out (bench/plot.sh $out draws them)"
