#!/usr/bin/env bash
# bench/cluster_bench.sh: throughput scaling of replicas behind nginx (scripts/cluster.sh).
# For R = 1 .. --replicas, starts R replicas, each pinned to its own slice of the cores
# (nproc / max replicas cores and as many --threads), runs `tessera loadgen` through nginx
# with N streams per replica in flight, and reports output tok/s and the scaling over one
# replica. bench/compare.sh --cluster runs it with compare.sh's options.
#
# usage: bench/cluster_bench.sh [-n N] [-o DIR] [-m MODEL] [--prompt-len L]
#                               [--max-tokens M] [--replicas R] [--build DIR]
# Defaults: N 16, prompt 32, 64 tokens, R 3, results in build/compare/cluster/.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
. "$root/bench/lib_args.sh" # -n -o -m --prompt-len --max-tokens --replicas --build --help
while (($#)); do
  bench_option 2,10 "$@"
  shift "$bench_used"
done
max_replicas=$replicas # runs of 1 .. R replicas
[[ $max_replicas =~ ^[1-9]$ ]] || { echo "cluster_bench.sh: --replicas wants 1..9" >&2; exit 2; }
out=$(mkdir -p "${out:-$build/compare/cluster}" && cd "${out:-$build/compare/cluster}" && pwd)
tessera=$build/tessera
model=$(realpath "${model:-$build/stories110m-synth.gguf}")
[ -x "$tessera" ] || { echo "cluster_bench.sh: no $tessera" >&2; exit 2; }
[ -f "$model" ] || "$tessera" synth --shape stories110m -o "$model" >&2
command -v nginx >/dev/null || [ -x /usr/sbin/nginx ] || { echo "cluster_bench.sh: needs nginx" >&2; exit 2; }
nginx=$(command -v nginx || echo /usr/sbin/nginx)

cores=$(nproc)
per=$((cores / max_replicas))
if ((per < 1)); then
  per=1
  echo "cluster_bench.sh: $cores cores for $max_replicas replicas: slices overlap" >&2
fi
base=$((20000 + RANDOM % 20000))
conf=""
cleanup() { [ -n "$conf" ] && "$root/scripts/cluster.sh" stop "$conf" >/dev/null 2>&1 || true; }
trap cleanup EXIT

results=()
for ((r = 1; r <= max_replicas; r++)); do
  cpus=""
  for ((i = 0; i < r; i++)); do
    lo=$(((i * per) % cores)) hi=$(((i * per) % cores + per - 1))
    cpus+="$lo-$hi "
  done
  conf=$out/cluster-$r.conf
  cat >"$conf" <<EOF
replicas = $r
binary = $tessera
model = $model
base_port = $((base + 1))
listen = 127.0.0.1:$base
state = $out/state-$r
threads = $per
cpus = $cpus
serve_args = --max-seqs $conc --grace 1
nginx = $nginx
EOF
  "$root/scripts/cluster.sh" start "$conf" >&2
  level=$((conc * r))
  echo "cluster_bench.sh: $r replica(s) on cores $cpus, $level streams in flight" >&2
  OMP_WAIT_POLICY=passive "$tessera" loadgen --url "http://127.0.0.1:$base" --concurrency "$level" \
    --requests $((2 * level)) --prompt-len "$prompt_len" --max-tokens "$max_tokens" --stream \
    --timeout 300 --deadline 400 --json "$out/replicas-$r.json" >&2 ||
    echo "cluster_bench.sh: WARNING: some requests failed with $r replicas" >&2
  "$root/scripts/cluster.sh" stop "$conf" >&2
  conf=""
  results+=("$(jq -c --argjson r "$r" --argjson per "$per" \
    '{replicas: $r, cores_each: $per, streams: .levels[0].concurrency, output_tok_s: .levels[0].output_tok_s,
      ok: .levels[0].ok, failed: .levels[0].failed}' "$out/replicas-$r.json")")
done

printf '%s\n' "${results[@]}" | jq -s --arg model "$model" --argjson cores "$cores" \
  --arg cpu "$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')" \
  '{model: $model, cpu: $cpu, cores: $cores,
    runs: (. as $all | map(. + {scaling: (.output_tok_s / $all[0].output_tok_s)}))}' \
  >"$out/summary.json"
echo
echo "== cluster: $model, prompt $prompt_len, $max_tokens tokens, $per cores per replica =="
jq -r '.runs[] | "\(.replicas) replica(s), \(.streams) streams: \(.output_tok_s * 10 | round / 10) output tok/s, \(.scaling * 100 | round / 100)x (\(.ok) ok, \(.failed) failed)"' \
  "$out/summary.json"
echo "results in $out"
