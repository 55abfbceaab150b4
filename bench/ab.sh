#!/usr/bin/env bash
# bench/ab.sh: two builds of tessera on the same model and options, run in turn (A B A B ...)
# for R rounds of llama-batched-bench's schedule (`tessera bench --schedule pp-tg`), so a
# change can be told from the machine's drift: on the lent 16-core machines a single short
# run of the same build moved 10-17% from one round to the next, more than most changes
# gain. Prints, for each stream count, each build's median S_PP and S_TG, and B's median
# over A's with the range of the rounds' own ratios (a range that spans 1.00 is noise).
#
# usage: bench/ab.sh --a DIR --b DIR [--rounds 3] -- BENCH_OPTIONS...
#   --a DIR, --b DIR  folders holding tessera (a bundle's bin/, or a build folder)
#   --rounds R        rounds, each running A then B (default 3)
#   BENCH_OPTIONS     for `tessera bench`, e.g. -m M --threads 16 --concurrency 1,16
#                     --prompt-len 64 -n 32 (--schedule pp-tg and --bw-mem 0 are added)
# example: bench/ab.sh --a old/bin --b new/bin -- -m q.gguf --concurrency 1,16 -n 32
set -euo pipefail
a="" b="" rounds=3
while (($#)); do
  case $1 in
    --a) a=$2; shift 2 ;;
    --b) b=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --) shift; break ;;
    -h|--help) sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "ab.sh: unknown option $1 (--help)" >&2; exit 2 ;;
  esac
done
for d in "$a" "$b"; do
  [[ -x $d/tessera ]] || { echo "ab.sh: no tessera in '$d' (--a DIR --b DIR)" >&2; exit 2; }
done
[[ $rounds =~ ^[1-9][0-9]*$ ]] || { echo "ab.sh: --rounds must be a positive integer" >&2; exit 2; }
(($#)) || { echo "ab.sh: give tessera bench's options after --" >&2; exit 2; }

# one run: lines "conc S_PP S_TG" from the pp-tg table
run() {
  "$1/tessera" bench "${@:2}" --schedule pp-tg --bw-mem 0 2>&1 |
    awk '/schedule \(every/ { on = 1; next } on && $1 ~ /^[0-9]+$/ && $2 ~ /^[0-9.]+$/ && NF >= 6 { print $1, $3, $5 }'
}
rows=$(mktemp)
trap 'rm -f "$rows"' EXIT
for ((r = 1; r <= rounds; r++)); do
  for side in A B; do
    dir=$a
    [[ $side == B ]] && dir=$b
    run "$dir" "$@" | sed "s/^/$r $side /" >>"$rows"
  done
done
[[ -s $rows ]] || { echo "ab.sh: no pp-tg rows came back (run one by hand to see why)" >&2; exit 1; }

echo "A: $a  B: $b  rounds: $rounds  (medians; B/A's range is over the rounds' own ratios)"
echo "| streams | S_PP A | S_PP B | B/A | S_TG A | S_TG B | B/A |"
echo "|---|---|---|---|---|---|---|"
awk '
function median(list,   n, v, i, j, t) {
  n = split(list, v, " ")
  for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (v[j] < v[i]) { t = v[i]; v[i] = v[j]; v[j] = t }
  return n % 2 ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2
}
function range(c, k,   r, lo, hi, q, ka, kb, qa, qb) {
  lo = 1e30; hi = 0
  for (r = 1; r <= R; r++) {
    ka = r SUBSEP "A" SUBSEP c; kb = r SUBSEP "B" SUBSEP c
    if (!(ka in val) || !(kb in val)) continue
    split(val[ka], qa, " "); split(val[kb], qb, " ")
    if (qa[k] <= 0) continue
    q = qb[k] / qa[k]; lo = (q < lo ? q : lo); hi = (q > hi ? q : hi)
  }
  return (hi > 0 ? sprintf("%.2f-%.2f", lo, hi) : "-")
}
# column k (1 S_PP, 2 S_TG) of side s at c streams, every round, as a list for median()
function list(s, c, k,   r, key, q, out) {
  out = ""
  for (r = 1; r <= R; r++) {
    key = r SUBSEP s SUBSEP c
    if (key in val) { split(val[key], q, " "); out = out " " q[k] }
  }
  return out
}
{ val[$1 SUBSEP $2 SUBSEP $3] = $4 " " $5; if ($1 > R) R = $1
  if (!($3 in seen)) { seen[$3] = 1; order[++n] = $3 } }
END {
  for (i = 1; i <= n; i++) {
    c = order[i]
    pa = median(list("A", c, 1)); pb = median(list("B", c, 1))
    ta = median(list("A", c, 2)); tb = median(list("B", c, 2))
    printf "| %d | %.2f | %.2f | %.3f (%s) | %.2f | %.2f | %.3f (%s) |\n", c, pa, pb,
      (pa > 0 ? pb / pa : 0), range(c, 1), ta, tb, (ta > 0 ? tb / ta : 0), range(c, 2)
  }
}' "$rows"
