#!/usr/bin/env bash
# bench/host_run.sh: tessera against the llama.cpp peer, and its thread scaling, on a
# many-core machine, in parts of 10 minutes at most, run from bench/bundle.sh's archive.
# Every part writes its raw outputs and a summary under OUT/PART; tar OUT to bring it back.
#
# usage: bench/host_run.sh PART --bin DIR --peer DIR --vocab FILE --out DIR [--threads N]
#   PART  a: bench/peer.sh, TinyLlama-1.1B shape, Q4_K_M and Q8_0: 1/16/64 streams,
#            prefill of 512-token prompts at 1 and 16 sequences
#         b: bench/peer.sh, stories110m shape, Q4_K_M and Q8_0, the same levels; then
#            TinyLlama Q4_K_M at one stream with a 2046-token prefill (its context is
#            2048: the prompt and its 2 tokens fill it)
#         c: bench/threads.sh on TinyLlama Q4_K_M (1, 2, 4, 8, 16 threads; 1 and 16
#            streams), then `--pack off` against the default at one stream, interleaved
#            three times (the packs' single stream against the file blocks' direct tile)
#         d: the model families at real shapes, Q4_K_M (SHAPES, default qwen3-8b and
#            gemma3-4b): 1 and 16 streams, prefill of 4 x 512, against each peer given
#         e: a mixture of experts (SHAPES, default qwen3-30b-a3b), Q4_K_M: 1, 16 and 64
#            streams, prefill of 16 x 512, against each peer given
#         f: speculative decoding, Llama-3.1-8B shape Q4_K_M drafted by Llama-3.2-1B
#            Q4_K_M: one stream plain, with the draft model at forced acceptances 0.7,
#            0.8 and 0 (eager and not), prompt lookup on the scripted editing workload;
#            64 streams without, with prompt lookup and with the draft model (2 rounds);
#            the peers' plain decode on the same file
#         g: embeddings, bge-small and Qwen3-Embedding-0.6B shapes, Q8_0 and F16:
#            bench/embed_peer.sh (batches of 1 and 64 documents of 256 tokens) against
#            the shared llama-server; the F16 files again with --pack off, bge-small Q8_0
#            with --step-tokens 512
#   --bin DIR     tessera and the benchmarks (the bundle's bin/; its lib/ in LD_LIBRARY_PATH)
#   --peer DIR    the llama.cpp binaries (the unpacked peer tarball)
#   --vocab FILE  a llama SPM vocabulary GGUF (../shared/vocab/ggml-vocab-llama-spm.gguf)
#   --native DIR  also the peer built here (bench/peer_native.sh's DIR), parts d, e and f
#   --ik DIR      also ik_llama.cpp built here (bench/peer_native.sh on its source), parts
#                 d and e
#   --shapes L    parts d and e: comma list of synth shapes
#   --threads N   threads for both programs (default all CPUs)
#   --threads-list L  part c's thread counts (default 1,2,4,8,16)
# Models are synthesized once per OUT (tessera synth) and reused by later parts.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
usage() { sed -n '2,35p' "$0" | sed 's/^# \{0,1\}//'; }
case ${1:-} in -h|--help) usage; exit 0 ;; esac
part=${1:-}
shift || true
bin="" peer="" native="" ik="" shapes="" vocab="" out="" threads=$(nproc) threads_list=1,2,4,8,16
while (($#)); do
  case $1 in
    --bin) bin=$2; shift 2 ;;
    --peer) peer=$2; shift 2 ;;
    --native) native=$2; shift 2 ;;
    --ik) ik=$2; shift 2 ;;
    --shapes) shapes=$2; shift 2 ;;
    --vocab) vocab=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --threads-list) threads_list=$2; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "host_run.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
case $part in a|b|c|d|e|f|g) ;; *) echo "host_run.sh: PART is a to g (--help)" >&2; exit 2 ;; esac
[[ -x $bin/tessera ]] || { echo "host_run.sh: no tessera in --bin '$bin'" >&2; exit 2; }
[[ -f $vocab ]] || { echo "host_run.sh: no vocabulary '$vocab' (--vocab)" >&2; exit 2; }
[[ -n $out ]] || { echo "host_run.sh: --out DIR is required" >&2; exit 2; }
models=$out/models
mkdir -p "$models" "$out/$part"

# The synthetic model of shape $1 and type $2 (written once, then reused), on disk before
# anything is timed: the kernel's writeback of a fresh 700 MB file went on under the first
# runs after it (a round of 16-thread steps took 6x their time). Layer matrices hold 4096
# distinct rows (synth --distinct-rows): the same speed, minutes less writing.
model() {
  local f=$models/$1-$2.gguf v=(--vocab "$vocab")
  case $1 in bge-small|qwen3-embedding-0.6b) v=() ;; esac # their own vocabulary sizes
  if [[ ! -f $f ]]; then
    "$bin/tessera" synth --shape "$1" --type "$2" "${v[@]}" --distinct-rows 4096 -o "$f" >&2
    sync
  fi
  echo "$f"
}

# bench/peer.sh on one shape, its models linked from the shared folder.
peer_run() {
  local shape=$1 dir=$out/$part/$1
  shift
  mkdir -p "$dir"
  for t in Q4_K_M Q8_0; do ln -sf "$(model "$shape" "$t")" "$dir/$shape-$t.gguf"; done
  "$root/bench/peer.sh" --peer "$peer" --build "$bin" --out "$dir" --threads "$threads" \
    --shape "$shape" --vocab "$vocab" "$@"
}

# Each shape of $1 (comma list) in Q4_K_M against the shared peer and, with --native and
# --ik, those built here: bench/peer.sh once per peer on the same file, into
# OUT/PART/SHAPE/PEER.
peers_run() {
  local list=$1 shape p dir
  shift
  for shape in ${list//,/ }; do
    for p in shared native ik; do
      local pdir=$peer
      [[ $p == native ]] && pdir=$native
      [[ $p == ik ]] && pdir=$ik
      [[ -n $pdir ]] || continue
      dir=$out/$part/$shape/$p
      mkdir -p "$dir"
      ln -sf "$(model "$shape" Q4_K_M)" "$dir/$shape-Q4_K_M.gguf"
      "$root/bench/peer.sh" --peer "$pdir" --build "$bin" --out "$dir" --threads "$threads" \
        --shape "$shape" --vocab "$vocab" --types Q4_K_M "$@"
    done
  done
}

# tessera bench's result rows of one run (levels, speculation) with the options as a title
bench_rows() {
  local name=$1 f=$out/$part/$1.txt
  shift
  "$bin/tessera" bench --threads "$threads" --bw-mem 0 "$@" >"$f" 2>&1 || true
  echo "== $name: $*"
  grep -E '^ +[0-9]+ +[0-9]+\.[0-9]+ +[0-9.]+x|^ +[0-9]+ +[0-9]+ +[0-9]+ +[0-9.]+%' "$f" || tail -2 "$f"
}

case $part in
f)
  t=$(model llama3.1-8b Q4_K_M)
  d=$(model llama3.2-1b Q4_K_M)
  one=(-m "$t" --concurrency 1 --prompt-len 128 -n 128)
  {
    bench_rows plain "${one[@]}"
    for p in 0.7 0.8 0; do
      bench_rows "draft-$p" "${one[@]}" --draft-model "$d" --spec-force-accept "$p"
      bench_rows "draft-$p-eager" "${one[@]}" --draft-model "$d" --spec-force-accept "$p" \
        --spec-eager
    done
    edit=(-m "$t" --concurrency 1 --workload edit -n 256 --edit-script 0.05)
    bench_rows edit-off "${edit[@]}" --spec off
    bench_rows edit-ngram "${edit[@]}" --spec ngram
    many=(-m "$t" --concurrency 64 --prompt-len 16 -n 48 --rounds 2)
    bench_rows many-off "${many[@]}" --spec off
    bench_rows many-ngram "${many[@]}" --spec ngram
    bench_rows many-draft "${many[@]}" --draft-model "$d"
    for p in "$peer" "$native"; do
      [[ -n $p ]] || continue
      echo "== llama-batched-bench $p (PP 128, TG 128, 1 stream)"
      "$p/llama-batched-bench" -m "$t" -t "$threads" -c 2048 -npp 128 -ntg 128 -npl 1 2>&1 |
        grep -E '^\|' | tail -1
    done
  } | tee "$out/f/summary.md"
  ;;
g)
  for shape in bge-small qwen3-embedding-0.6b; do
    for type in Q8_0 F16; do
      docs=128
      [[ $shape == bge-small ]] || docs=64
      "$root/bench/embed_peer.sh" -m "$(model "$shape" "$type")" --peer "$peer" --bin "$bin" \
        --threads "$threads" --docs "$docs" --out "$out/g/$shape-$type"
    done
  done | tee "$out/g/summary.md"
  # The F16 models again on the file's F16 (no bf16 tiles: a generative model's way), and
  # bge-small Q8_0 at a generative model's step budget (one document a step)
  for run in "bge-small F16 --pack off" "qwen3-embedding-0.6b F16 --pack off" \
    "bge-small Q8_0 --step-tokens 512"; do
    read -r shape type opts <<<"$run"
    echo "$shape $type, tessera serve $opts:"
    "$root/bench/embed_peer.sh" -m "$(model "$shape" "$type")" --peer "$peer" --bin "$bin" \
      --threads "$threads" --docs 64 --tessera-opts "$opts" \
      --out "$out/g/$shape-$type-${opts// /}"
  done | tee -a "$out/g/summary.md"
  ;;
d)
  peers_run "${shapes:-qwen3-8b,gemma3-4b}" --levels 1,16 --prompt-len 64 -n 32 \
    --prefill-seqs 4
  ;;
e)
  peers_run "${shapes:-qwen3-30b-a3b}" --levels 1,16,64 --prompt-len 64 -n 32 \
    --prefill-seqs 16
  ;;
a)
  peer_run tinyllama-1.1b --types Q4_K_M,Q8_0 --prompt-len 32 -n 64 --prefill-seqs 1,16
  ;;
b)
  peer_run stories110m --types Q4_K_M,Q8_0 --prompt-len 32 -n 64 --prefill-seqs 1,16
  m=$(model tinyllama-1.1b Q4_K_M)
  "$bin/tessera" bench -m "$m" --threads "$threads" --concurrency 1 -n 2 --prompt-len 2046 \
    --schedule both --json "$out/b/prefill-2046.json" >"$out/b/prefill-2046.txt" 2>&1
  "$peer/llama-batched-bench" -m "$m" -t "$threads" -c 2048 -npp 2046 -ntg 2 -npl 1 \
    >"$out/b/prefill-2046.peer.txt" 2>&1 || true
  ;;
c)
  m=$(model tinyllama-1.1b Q4_K_M)
  # three rounds, medians: one thread's runs spread by 15% within one run of this part
  "$root/bench/threads.sh" -m "$m" --build "$bin" --threads-list "$threads_list" \
    --concurrency 1,16 -n 32 --prompt-len 32 --rounds 3 -o "$out/c/threads" | tee "$out/c/threads.txt"
  for round in 1 2 3; do
    for pack in off auto; do
      "$bin/tessera" bench -m "$m" --threads "$threads" --concurrency 1 -n 48 --prompt-len 16 \
        --bw-mem 0 --pack "$pack" >"$out/c/pack-$pack-$round.txt" 2>&1
      printf 'round %d --pack %-4s %s\n' "$round" "$pack" \
        "$(grep -E '^ +1 +[0-9]+\.[0-9]' "$out/c/pack-$pack-$round.txt" | head -1)"
    done
  done | tee "$out/c/pack.txt"
  ;;
esac
echo "host_run.sh: part $part done; results in $out/$part" >&2
