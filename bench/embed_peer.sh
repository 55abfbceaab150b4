#!/usr/bin/env bash
# bench/embed_peer.sh: embedding throughput of `tessera serve` against llama.cpp's
# `llama-server --embedding` on the same GGUF and threads, both through /v1/embeddings and
# driven by the same client (`tessera loadgen --embeddings`), so tokenization, HTTP and
# pooling are counted alike on both sides. At each batch size B, requests of B documents
# of about --doc-len tokens are sent one after another; tokens/s = the prompt tokens the
# server counted (usage) / wall time, after one untimed request of B other documents
# (either server's first large batch faults in its buffers' pages, once in a serving
# process).
# loadgen's prompts are words; the words per document are set from one calibration
# request, and the table prints the tokens a document had.
#
# usage: bench/embed_peer.sh -m MODEL --peer DIR [--bin DIR] [--threads N]
#                            [--doc-len 256] [--batches 1,64] [--docs 128] [--out DIR]
#   --peer DIRS   folders with llama-server, comma-separated: a row for each (the unpacked
#                 shared peer tarball; the shared source tarball cannot build llama-server,
#                 as it lacks the scripts/ folder its web page's build runs)
#   --bin DIR     folder with tessera (default build/)
#   --docs N      documents per batch size (default 128: 128 requests of 1, 2 of 64)
#   --out DIR     keep the loadgen JSON and both servers' logs there (default a temp dir)
#   --peer-ub N   the peer's batch and micro-batch (-b = -ub; default 512, at least
#                 doc-len + 64: a document must fit one micro-batch)
#   --tessera-opts "OPTS"  more options for `tessera serve` (e.g. "--step-tokens 4096")
# The peer runs with one slot per document of the largest batch (-np B) and a context of
# B x (doc-len + 64). A micro-batch of 512 is its fastest here: one that holds all 64
# documents was 5x slower at batch 64 (its attention then spans the whole micro-batch).
# tessera runs with its defaults.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin=$root/build
peer=""
model=""
threads=$(nproc)
doc_len=256
batches=1,64
docs=128
out=""
peer_ub=512
tessera_opts=""
while (($#)); do
  case $1 in
    -m) model=$2; shift 2 ;;
    --peer) peer=$2; shift 2 ;;
    --bin) bin=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --doc-len) doc_len=$2; shift 2 ;;
    --batches) batches=$2; shift 2 ;;
    --docs) docs=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --peer-ub) peer_ub=$2; shift 2 ;;
    --tessera-opts) tessera_opts=$2; shift 2 ;;
    -h|--help) sed -n '2,23p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "embed_peer.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
[ -n "$model" ] && [ -f "$model" ] || { echo "embed_peer.sh: -m MODEL is required" >&2; exit 2; }
for dir in ${peer//,/ }; do
    [ -x "$dir/llama-server" ] || { echo "embed_peer.sh: no llama-server in '$dir'" >&2; exit 2; }
done
[ -n "$peer" ] || { echo "embed_peer.sh: --peer is required" >&2; exit 2; }
[ -n "$out" ] || out=$(mktemp -d)
mkdir -p "$out"
max_b=$(tr ',' '\n' <<<"$batches" | sort -n | tail -1)
ctx=$((max_b * (doc_len + 64)))
((peer_ub >= doc_len + 64)) || peer_ub=$((doc_len + 64))
pid=""
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; wait 2>/dev/null || true' EXIT

# a number field of loadgen's --json output (the first one: its only level)
field() { grep -o "\"$2\":[[:space:]]*[0-9.e+-]*" "$1" | head -1 | sed 's/.*:[[:space:]]*//'; }
# PORT: GET /health answers 200. Bash's /dev/tcp, not curl: a bundle's LD_LIBRARY_PATH may
# hold a libcurl the system's curl cannot load.
healthy() {
    { exec 3<>"/dev/tcp/127.0.0.1/$1"; } 2>/dev/null || return 1
    printf 'GET /health HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n' >&3
    local status=""
    read -r _ status _ <&3 || true
    exec 3<&-
    [ "$status" = 200 ]
}
wait_up() {
    for _ in $(seq 1 300); do
        healthy "$1" && return 0
        kill -0 "$pid" 2>/dev/null || return 1
        sleep 0.1
    done
    return 1
}
# PORT's step time by phase, summed over its prompt steps so far (an encoder's steps are all
# prompt steps), from its /metrics: lines "PHASE SECONDS"
phases() {
    { exec 3<>"/dev/tcp/127.0.0.1/$1"; } 2>/dev/null || return 0
    printf 'GET /metrics HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n' >&3
    grep -o 'step_seconds_total{[^}]*kind="prompt",phase="[a-z_]*"} [0-9.e+-]*' <&3 |
        sed 's/.*phase="\([a-z_]*\)"} /\1 /'
    exec 3<&-
}
loadgen() { # PORT BATCH WORDS REQUESTS JSON [SEED]
    "$bin/tessera" loadgen --url "http://127.0.0.1:$1" --embeddings --batch "$2" \
        --prompt-len "$3" --requests "$4" --concurrency 1 --no-metrics --json "$5" \
        --seed "${6:-1}" >"${5%.json}.txt" 2>&1
}
# run SIDE PORT: each batch size against the server on PORT; a line "B tok/s tokens requests"
run() {
    local side=$1 port=$2 b
    for b in ${batches//,/ }; do
        local n=$((docs / b)) j=$out/$side-b$b.json
        ((n >= 1)) || n=1
        # the warm-up's documents are not the timed ones (seed 2): llama-server reuses a
        # slot's K/V for a prompt it has seen, which would time a decoder model's cache
        loadgen "$port" "$b" "$words" 1 "${j%.json}-warm.json" 2 || true
        if [ "$side" = tessera ]; then phases "$port" >"$out/phases-was"; fi
        loadgen "$port" "$b" "$words" "$n" "$j" ||
            { echo "embed_peer.sh: loadgen failed on $side, batch $b:" >&2; tail -3 "${j%.json}.txt" >&2; }
        echo "$b $(field "$j" prompt_tok_s) $(field "$j" prompt_tokens) $n"
        if [ "$side" = tessera ]; then # this batch size's share of the step time
            phases "$port" >"$out/phases-now"
            awk -v b="$b" 'NR == FNR { was[$1] = $2; next }
                { printf "%s%s %.2f s", (FNR > 1 ? ", " : "batch " b ": "), $1, $2 - was[$1] }
                END { print "" }' "$out/phases-was" "$out/phases-now" >>"$out/tessera.phases"
        fi
    done
}

port=18431
# shellcheck disable=SC2086 # tessera_opts is a list of options
"$bin/tessera" serve -m "$model" --threads "$threads" --port "$port" --no-ui $tessera_opts \
    >"$out/tessera.log" 2>&1 &
pid=$!
wait_up "$port" || { echo "embed_peer.sh: tessera serve did not start:" >&2; tail -5 "$out/tessera.log" >&2; exit 1; }
loadgen "$port" 4 64 1 "$out/calibrate.json" || true
per64=$(field "$out/calibrate.json" prompt_tokens) # tokens of 4 documents of 64 words
words=$((doc_len * 256 / (${per64:-256} > 0 ? ${per64:-256} : 256)))
((words >= 1)) || words=1
run tessera "$port" >"$out/tessera.rows"
kill "$pid"; wait "$pid" 2>/dev/null || true

echo "| model | batch | tokens/doc | tessera tok/s | peer | peer tok/s | ratio |"
echo "|---|---|---|---|---|---|---|"
for dir in ${peer//,/ }; do
    name=$(basename "$dir")
    port=$((port + 1))
    "$dir/llama-server" -m "$model" --embedding -t "$threads" -tb "$threads" --port "$port" \
        -c "$ctx" -np "$max_b" -b "$peer_ub" -ub "$peer_ub" >"$out/peer-$name.log" 2>&1 &
    pid=$!
    if ! wait_up "$port"; then
        echo "embed_peer.sh: llama-server in $dir did not start:" >&2
        tail -5 "$out/peer-$name.log" >&2
        continue
    fi
    run "peer-$name" "$port" >"$out/peer-$name.rows"
    kill "$pid"; wait "$pid" 2>/dev/null || true
    pid=""
    join "$out/tessera.rows" "$out/peer-$name.rows" | awk -v m="$(basename "$model")" -v p="$name" '{
        printf "| %s | %d | %.0f | %.1f | %s | %.1f | %.2fx |\n", m, $1, $3 / ($1 * $4), $2, p,
            $5, ($5 > 0 ? $2 / $5 : 0) }'
done
echo "tessera's step time by phase (its /metrics):"
sed 's/^/  /' "$out/tessera.phases"
