#!/usr/bin/env bash
# bench/peer_plot.sh: decode tok/s against concurrent streams for tessera and the llama.cpp
# peer, side by side on one plot (gnuplot), from bench/peer.sh's streams.tsv. peer.sh runs
# it when gnuplot is there; where it is not, copy streams.tsv to a machine that has it and
# run it there (it installs gnuplot-nox on Debian when missing).
#
# usage: bench/peer_plot.sh STREAMS.tsv [OUT.png] [TITLE]
#   STREAMS.tsv: a header, then rows "series<TAB>streams<TAB>tessera tok/s<TAB>llama.cpp
#   tok/s" ("-" where one was not measured); each series (a type, or a type with an
#   option such as --amx) gets one colour, tessera solid and llama.cpp dashed.
set -euo pipefail
tsv=${1:?usage: bench/peer_plot.sh STREAMS.tsv [OUT.png] [TITLE]}
png=${2:-${tsv%.tsv}.png}
title=${3:-decode tok/s against concurrent streams, same GGUF and threads}
[ -f "$tsv" ] || { echo "peer_plot.sh: no $tsv" >&2; exit 2; }
if ! command -v gnuplot >/dev/null; then
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  echo "peer_plot.sh: installing gnuplot-nox" >&2
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends gnuplot-nox >&2
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# One data block per series (gnuplot's index), "-" as its missing value "?".
python3 - "$tsv" "$tmp" <<'PY'
import sys
tsv, tmp = sys.argv[1:3]
series = {}
for line in open(tsv).read().splitlines()[1:]:
    cells = line.split("\t")
    if len(cells) < 4 or not cells[1].strip().isdigit():
        continue
    series.setdefault(cells[0], []).append(
        [cells[1]] + ["?" if c.strip() in ("-", "") else c.strip() for c in cells[2:4]])
with open(f"{tmp}/data", "w") as d, open(f"{tmp}/names", "w") as n:
    for name, rows in series.items():
        rows.sort(key=lambda r: int(r[0]))
        d.write("\n".join("\t".join(r) for r in rows) + "\n\n\n")
        has = [any(r[k] != "?" for r in rows) for k in (1, 2)]
        n.write(f"{name}\t{int(has[0])}\t{int(has[1])}\n")
PY
n=$(wc -l <"$tmp/names")
((n > 0)) || { echo "peer_plot.sh: no rows in $tsv" >&2; exit 2; }
xmax=$(awk -F'\t' 'NR > 1 && $2 + 0 > m { m = $2 + 0 } END { print m * 1.4 }' "$tsv")
plot=""
i=0
# A series without numbers on one side draws no curve there.
while IFS=$'\t' read -r name has_t has_l; do
  ((has_t)) && plot+="${plot:+, }'$tmp/data' index $i using 1:2 with linespoints lw 2 pt 7 ps 1.3 lc $((i + 1)) title 'tessera, $name'"
  ((has_l)) && plot+="${plot:+, }'$tmp/data' index $i using 1:3 with linespoints lw 2 dt 2 pt 6 ps 1.3 lc $((i + 1)) title 'llama.cpp, $name'"
  i=$((i + 1))
done <"$tmp/names"
gnuplot <<GP
set terminal pngcairo size 960,600 font 'sans,11' noenhanced
set output '$png'
set title "$title"
set xlabel 'concurrent streams'
set ylabel 'decode tokens/s'
set logscale x 2
set xrange [0.8:$xmax]
set xtics (1, 2, 4, 8, 16, 32, 64, 128, 256)
set grid
set key top left box opaque
set yrange [0:*]
set datafile missing '?'
plot $plot
GP
echo "$png"
