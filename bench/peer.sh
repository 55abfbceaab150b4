#!/usr/bin/env bash
# bench/peer.sh: tessera against the llama.cpp peer on the same GGUF, same threads, in one
# run. For each type it writes one synthetic model at a real shape (random weights: speed
# depends on shapes and types, not values), then runs llama-batched-bench and
# `tessera bench` on that file and prints decode tok/s at each level, prefill tok/s and
# peak RSS side by side with their ratio. Every raw output stays in the output folder;
# streams.tsv (decode tok/s per level) is drawn by bench/peer_plot.sh into streams.png.
#
# usage: bench/peer.sh --peer DIR [--build DIR] [--out DIR] [--threads N]
#                      [--shape SHAPE] [--types LIST] [--levels LIST] [--vocab FILE]
#                      [--prompt-len P] [-n N] [--prefill-len P] [--prefill-seqs LIST]
#   --peer DIR      the llama.cpp binaries (llama-batched-bench), e.g. the unpacked
#                   ../shared/peers/llama.cpp-3f545be.tar.xz
#   --types LIST    comma list of synth types (default Q4_K_M,Q8_0)
#   defaults: build/, build/peer/, all cores, tinyllama-1.1b, levels 1,16,64, prompt 128,
#   64 generated tokens, prefill of 512-token prompts at 1 and 16 sequences. The prefill
#   runs generate one token a request on both sides (llama-batched-bench -ntg 1, tessera
#   -n 1), so the prompts are the only work: with a second token, each finished prompt
#   decoded once more beside the others' chunks, and tessera's latency bound (--itl-target)
#   held those steps to a 32-row chunk, 15 of a 16 x 512 run's 31 steps.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=$root/build
out=""
peer=""
threads=$(nproc)
shape=tinyllama-1.1b
types=Q4_K_M,Q8_0
levels=1,16,64
vocab=$root/../shared/vocab/ggml-vocab-llama-spm.gguf
prompt_len=128
n_gen=64
prefill_len=512
prefill_seqs=1,16
while (($#)); do
  case $1 in
    --peer) peer=$2; shift 2 ;;
    --build) build=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --shape) shape=$2; shift 2 ;;
    --types) types=$2; shift 2 ;;
    --levels) levels=$2; shift 2 ;;
    --vocab) vocab=$2; shift 2 ;;
    --prompt-len) prompt_len=$2; shift 2 ;;
    -n) n_gen=$2; shift 2 ;;
    --prefill-len) prefill_len=$2; shift 2 ;;
    --prefill-seqs) prefill_seqs=$2; shift 2 ;;
    -h|--help) sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "peer.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
tessera=$build/tessera
out=${out:-$build/peer}
[ -x "$tessera" ] || { echo "peer.sh: no $tessera" >&2; exit 2; }
[ -n "$peer" ] && [ -x "$peer/llama-batched-bench" ] ||
  { echo "peer.sh: --peer must name a folder with llama-batched-bench" >&2; exit 2; }
[ -f "$vocab" ] || { echo "peer.sh: no vocabulary $vocab (--vocab)" >&2; exit 2; }
command -v python3 >/dev/null || { echo "peer.sh: needs python3 for the summary" >&2; exit 2; }
mkdir -p "$out"

# The decode run skips bench's memory-bandwidth probe (its buffer would count in the peak
# RSS); the prefill run measures it. Peak RSS (KiB) of a command, its output to a file: python's rusage of the child.
peak_rss() {
  local log=$1
  shift
  python3 - "$log" "$@" <<'EOF'
import resource, subprocess, sys
with open(sys.argv[1], "w") as log:
    rc = subprocess.run(sys.argv[2:], stdout=log, stderr=subprocess.STDOUT).returncode
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
sys.exit(rc)
EOF
}

max_level=$(tr ',' '\n' <<<"$levels" | sort -n | tail -1)
ctx=$(((prompt_len + n_gen) * max_level + 256))
pf_max=$(tr ',' '\n' <<<"$prefill_seqs" | sort -n | tail -1)
pf_ctx=$(((prefill_len + 8) * pf_max + 256))
for type in ${types//,/ }; do
  model=$out/$shape-$type.gguf
  if [ ! -f "$model" ]; then
    echo "== synth $shape $type" >&2
    "$tessera" synth --shape "$shape" --type "$type" --vocab "$vocab" --distinct-rows 4096 \
      -o "$model" >&2
    sync # its writeback would run under the first timings
  fi
  echo "== $type: llama.cpp decode" >&2
  peak_rss "$out/$type.peer-decode.txt" "$peer/llama-batched-bench" -m "$model" -t "$threads" \
    -c "$ctx" -npp "$prompt_len" -ntg "$n_gen" -npl "$levels" >"$out/$type.peer-decode.rss" || true
  echo "== $type: llama.cpp prefill" >&2
  "$peer/llama-batched-bench" -m "$model" -t "$threads" -c "$pf_ctx" -npp "$prefill_len" \
    -ntg 1 -npl "$prefill_seqs" >"$out/$type.peer-prefill.txt" 2>&1 || true
  echo "== $type: tessera decode" >&2
  peak_rss "$out/$type.tessera-decode.txt" "$tessera" bench -m "$model" --threads "$threads" \
    --concurrency "$levels" -n "$n_gen" --prompt-len "$prompt_len" --bw-mem 0 \
    --json "$out/$type.tessera-decode.json" >"$out/$type.tessera-decode.rss" || true
  echo "== $type: tessera, llama-batched-bench's schedule" >&2
  "$tessera" bench -m "$model" --threads "$threads" --concurrency "$levels" -n "$n_gen" \
    --prompt-len "$prompt_len" --bw-mem 0 --schedule pp-tg \
    --json "$out/$type.tessera-pptg.json" >"$out/$type.tessera-pptg.txt" 2>&1 || true
  echo "== $type: tessera prefill" >&2
  "$tessera" bench -m "$model" --threads "$threads" --concurrency "$prefill_seqs" -n 1 \
    --prompt-len "$prefill_len" --json "$out/$type.tessera-prefill.json" \
    >"$out/$type.tessera-prefill.txt" 2>&1 || true
done

python3 - "$out" "$types" "$levels" "$prefill_seqs" "$shape" "$threads" <<'EOF' | tee "$out/summary.md"
import json, os, re, sys
out, types, levels, pf_seqs, shape, threads = sys.argv[1:7]
levels = [int(x) for x in levels.split(",")]
pf_seqs = [int(x) for x in pf_seqs.split(",")]

def peer_table(path):
    """llama-batched-bench's rows: (B) -> (S_PP, S_TG, generated tokens / T)."""
    rows = {}
    try:
        text = open(path).read()
    except OSError:
        return rows
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) >= 10 and re.fullmatch(r"\d+", cells[2] or ""):
            b, tg, t = int(cells[2]), int(cells[1]), float(cells[8])
            rows[b] = (float(cells[5]), float(cells[7]), b * tg / t if t > 0 else None)
    return rows

def tessera_levels(path):
    try:
        d = json.load(open(path))
    except (OSError, ValueError):
        return {}, None, None
    return ({l["concurrency"]: l for l in d["levels"]}, d.get("bandwidth_gb_s"),
            d.get("weight_bytes"))

def tessera_pptg(path):
    """bench --schedule pp-tg's rows: (B) -> its S_PP/S_TG entry."""
    try:
        return {l["concurrency"]: l for l in json.load(open(path)).get("pp_tg", [])}
    except (OSError, ValueError):
        return {}

def rss(path):
    try:
        return int(open(path).read().split()[0]) / 1024
    except (OSError, ValueError, IndexError):
        return None

def ratio(a, b):
    return f"{a / b:.2f}x" if a and b else "-"

def num(x):
    return f"{x:.1f}" if x is not None else "-"

print(f"shape {shape}, {threads} threads\n")
streams = open(f"{out}/streams.tsv", "w")  # bench/peer_plot.sh draws it
streams.write("series\tstreams\ttessera_tok_s\tllama_cpp_tok_s\n")
for t in types.split(","):
    pd = peer_table(f"{out}/{t}.peer-decode.txt")
    pp = peer_table(f"{out}/{t}.peer-prefill.txt")
    td, _, _ = tessera_levels(f"{out}/{t}.tessera-decode.json")
    tp, bw, wb = tessera_levels(f"{out}/{t}.tessera-prefill.json")
    size = os.path.getsize(f"{out}/{shape}-{t}.gguf") / 2**20
    print(f"### {t} ({size:.0f} MiB file)\n")
    print("| measurement | tessera | llama.cpp | ratio |\n|---|---|---|---|")
    for b in levels:
        ts = td.get(b, {}).get("decode_tok_s")
        ps = pd.get(b, (None, None, None))[1]
        print(f"| decode tok/s, {b} streams | {num(ts)} | {num(ps)} | {ratio(ts, ps)} |")
        streams.write(f"{t}\t{b}\t{num(ts)}\t{num(ps)}\n")
    # like with like: the peer's own schedule and measures on both sides, and generated
    # tokens over the whole wall time (tessera's through its scheduler)
    tg = tessera_pptg(f"{out}/{t}.tessera-pptg.json")
    for b in levels:
        peer = pd.get(b, (None, None, None))
        for name, ours, theirs in (
                ("S_PP (batched-bench schedule)", tg.get(b, {}).get("s_pp_tok_s"), peer[0]),
                ("S_TG (batched-bench schedule)", tg.get(b, {}).get("s_tg_tok_s"), peer[1]),
                ("generated tok/s over wall time", td.get(b, {}).get("e2e_tok_s"), peer[2])):
            print(f"| {name}, {b} streams | {num(ours)} | "
                  f"{num(theirs)} | {ratio(ours, theirs)} |")
    for b in pf_seqs:
        ts = tp.get(b, {}).get("prefill_tok_s")
        ps = pp.get(b, (None, None, None))[0]
        print(f"| prefill tok/s, {b} x prompt | {num(ts)} | {num(ps)} | {ratio(ts, ps)} |")
    tr, pr = rss(f"{out}/{t}.tessera-decode.rss"), rss(f"{out}/{t}.peer-decode.rss")
    print(f"| peak RSS MiB (decode run) | {num(tr)} | {num(pr)} | {ratio(tr, pr)} |")
    if bw and wb and td.get(1):
        frac = wb * td[1]["decode_tok_s"] / (bw * 1e9)
        pfrac = wb * pd.get(1, (0, 0, 0))[1] / (bw * 1e9) if pd.get(1) else None
        print(f"| single stream: weight bytes x tok/s / read bandwidth ({bw:.0f} GB/s) "
              f"| {100 * frac:.0f}% | {100 * pfrac:.0f}% | |" if pfrac is not None else
              f"| single stream: weight bytes x tok/s / read bandwidth ({bw:.0f} GB/s) "
              f"| {100 * frac:.0f}% | - | |")
    print()
EOF
title="$shape, decode tok/s against concurrent streams, $threads threads, same GGUF"
if command -v gnuplot >/dev/null; then
  "$root/bench/peer_plot.sh" "$out/streams.tsv" "$out/streams.png" "$title"
else
  echo "no gnuplot here: bench/peer_plot.sh $out/streams.tsv draws tok/s against streams"
fi
