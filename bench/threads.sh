#!/usr/bin/env bash
# bench/threads.sh: thread scaling of `tessera bench`: the same levels at 1, 2, 4, 8, 16
# threads (one bench run each, its JSON kept), then one table of decode tok/s per level
# and thread count with the speedup over one thread, prefill tok/s and ITL p50/p99.
#
# usage: bench/threads.sh [-m MODEL] [--threads-list 1,2,4,8,16] [--concurrency 1,16,64]
#                         [-n 32] [--prompt-len 64] [--rounds 1] [-o DIR] [--build DIR]
#                         [-- more tessera bench options]
# Without -m it makes a synthetic stories110m (tessera synth) in DIR. Needs python3 for
# the table. The issue's target: batched decode at 16 threads >= 10x one thread.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=$root/build
model=""
threads=1,2,4,8,16
levels=1,16,64
n=32
prompt_len=64
rounds=1
out=""
extra=()
while (($#)); do
  case $1 in
    -m) model=$2; shift 2 ;;
    --threads-list) threads=$2; shift 2 ;;
    --concurrency) levels=$2; shift 2 ;;
    -n) n=$2; shift 2 ;;
    --prompt-len) prompt_len=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    -o) out=$2; shift 2 ;;
    --build) build=$2; shift 2 ;;
    --) shift; extra=("$@"); break ;;
    *) echo "threads.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
tessera=$build/tessera
[[ -x $tessera ]] || { echo "threads.sh: no $tessera (build first)" >&2; exit 1; }
out=${out:-$build/threads}
mkdir -p "$out"
if [[ -z $model ]]; then
  model=$out/stories110m.gguf
  [[ -f $model ]] || { "$tessera" synth --shape stories110m -o "$model" >/dev/null && sync; }
fi

IFS=, read -ra counts <<<"$threads"
for t in "${counts[@]}"; do
  echo "== $t threads" >&2
  OMP_NUM_THREADS=$t "$tessera" bench -m "$model" --threads "$t" --concurrency "$levels" \
    -n "$n" --prompt-len "$prompt_len" --rounds "$rounds" --bw-mem 0 \
    --json "$out/threads-$t.json" "${extra[@]}" >"$out/threads-$t.txt"
done

python3 - "$out" "${counts[@]}" <<'EOF'
import json, sys
out, counts = sys.argv[1], [int(c) for c in sys.argv[2:]]
runs = {t: json.load(open(f"{out}/threads-{t}.json")) for t in counts}
base = runs[counts[0]]
levels = [l["concurrency"] for l in base["levels"]]
print(f"model {base['model']}, prompt {base['prompt_len']}, n {base['n_tokens']}; "
      f"speedup = decode tok/s / that at {counts[0]} thread(s)")
print(f"{'threads':>7} {'conc':>5} {'decode tok/s':>12} {'speedup':>8} {'prefill tok/s':>13} "
      f"{'ITL p50/p99 ms':>17} {'mixed rows/step':>15}")
for t in counts:
    for l in runs[t]["levels"]:
        b = next(x for x in base["levels"] if x["concurrency"] == l["concurrency"])
        sp = l["decode_tok_s"] / b["decode_tok_s"] if b["decode_tok_s"] > 0 else 0.0
        m = l["prompt_steps"]["mixed"]
        mixed = f"{m['decode_rows_per_step']:.1f}+{m['prompt_rows_per_step']:.1f}"
        print(f"{t:>7} {l['concurrency']:>5} {l['decode_tok_s']:>12.1f} {sp:>7.2f}x "
              f"{l['prefill_tok_s']:>13.1f} {l['itl_ms']['p50']:>8.2f}/{l['itl_ms']['p99']:<8.2f} "
              f"{mixed:>15}")
EOF
