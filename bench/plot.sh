#!/usr/bin/env bash
# bench/plot.sh: draws the JSON results of bench/compare.sh (or of `tessera loadgen --json`)
# as PNGs with gnuplot: throughput vs concurrency, TTFT/ITL percentiles vs concurrency,
# and per-priority latency under mixed load; for compare.sh --peer, tessera and llama.cpp
# on the same axes. Installs gnuplot and jq (Debian) if missing.
#
# usage: bench/plot.sh DIR [OUTDIR]
#   DIR holds http.json (loadgen levels), and optionally inprocess.json (tessera bench)
#   and mixed.json (loadgen --mix); or peer-tessera.json and peer-llama.json (compare.sh
#   --peer). PNGs go to OUTDIR (default DIR): throughput.png, latency.png, priority.png;
#   peer_throughput.png and peer_latency.png.
set -euo pipefail
dir=${1:?usage: bench/plot.sh DIR [OUTDIR]}
outdir=${2:-$dir}
peer=0
[ -f "$dir/peer-tessera.json" ] && [ -f "$dir/peer-llama.json" ] && peer=1
[ -f "$dir/http.json" ] || ((peer)) ||
  { echo "plot.sh: no $dir/http.json, nor peer-tessera.json and peer-llama.json" >&2; exit 2; }
mkdir -p "$outdir"

missing=()
command -v gnuplot >/dev/null || missing+=(gnuplot-nox)
command -v jq >/dev/null || missing+=(jq)
if ((${#missing[@]})); then
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  echo "plot.sh: installing ${missing[*]}" >&2
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# The machine the numbers come from: this one unless PLOT_MACHINE names another (results
# copied back from another machine).
machine=${PLOT_MACHINE:-"$(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')"}
machine=${machine//_/'\\_'} # gnuplot's enhanced text would make "_K" a subscript

if ((peer)); then
  # One row per level: concurrency, tok/s, TTFT p50/p99, ITL p50/p99 ("?" = no samples).
  for s in tessera llama; do
    jq -r '.levels[] | [.concurrency, .output_tok_s, .ttft_ms.p50, .ttft_ms.p99, .itl_ms.p50,
            .itl_ms.p99] | map(. // "?") | @tsv' "$dir/peer-$s.json" >"$tmp/peer-$s.dat"
  done
  ptitle=$(jq -r '"prompt \(.shared_prefix + .prompt_len) words, \(.max_tokens) tokens, \(.requests_per_level) requests per level"' "$dir/peer-tessera.json")
  pmax=$(jq -s '[.[].levels[].concurrency] | max * 1.3' "$dir/peer-tessera.json" "$dir/peer-llama.json")
  gnuplot <<EOF
set terminal pngcairo size 960,600 font 'sans,11'
set output '$outdir/peer_throughput.png'
set title "Output throughput vs concurrent streams: tessera serve and llama-server\n{/*0.8 $ptitle; $machine}"
set xlabel 'concurrent streams'
set ylabel 'output tokens/s'
set logscale x 2
set xrange [0.8:$pmax]
set xtics (1, 2, 4, 8, 16, 32, 64, 128, 256)
set grid
set key top left box opaque
set yrange [0:*]
plot '$tmp/peer-tessera.dat' using 1:2 with linespoints lw 2 pt 7 ps 1.5 title 'tessera serve', \
     '$tmp/peer-llama.dat' using 1:2 with linespoints lw 2 pt 5 ps 1.5 title 'llama-server (llama.cpp)'
EOF
  gnuplot <<EOF
set terminal pngcairo size 1200,600 font 'sans,11'
set output '$outdir/peer_latency.png'
set multiplot layout 1,2 title "Latency vs concurrent streams: tessera serve and llama-server\n{/*0.8 $ptitle; $machine}"
set logscale x 2
set xrange [0.8:$pmax]
set xtics (1, 2, 4, 8, 16, 32, 64, 128, 256)
set xlabel 'concurrent streams'
set grid
set key top left box opaque
set yrange [0:*]
set title 'time to first token'
set ylabel 'TTFT (ms)'
plot '$tmp/peer-tessera.dat' using 1:3 with linespoints lw 2 pt 7 lc 1 title 'tessera p50', \
     '' using 1:4 with linespoints lw 1 dt 2 pt 6 lc 1 title 'tessera p99', \
     '$tmp/peer-llama.dat' using 1:3 with linespoints lw 2 pt 5 lc 2 title 'llama.cpp p50', \
     '' using 1:4 with linespoints lw 1 dt 2 pt 4 lc 2 title 'llama.cpp p99'
set title 'inter-token latency'
set ylabel 'ITL (ms)'
plot '$tmp/peer-tessera.dat' using 1:5 with linespoints lw 2 pt 7 lc 1 title 'tessera p50', \
     '' using 1:6 with linespoints lw 1 dt 2 pt 6 lc 1 title 'tessera p99', \
     '$tmp/peer-llama.dat' using 1:5 with linespoints lw 2 pt 5 lc 2 title 'llama.cpp p50', \
     '' using 1:6 with linespoints lw 1 dt 2 pt 4 lc 2 title 'llama.cpp p99'
unset multiplot
EOF
  if [ ! -f "$dir/http.json" ]; then
    ls "$outdir"/peer_*.png
    exit 0
  fi
fi

# null (no samples) becomes gnuplot's missing-value marker "?".
jq -r '.levels[] | [.concurrency, .output_tok_s, .req_s,
        .ttft_ms.p50, .ttft_ms.p90, .ttft_ms.p99, .itl_ms.p50, .itl_ms.p90, .itl_ms.p99]
       | map(. // "?") | @tsv' "$dir/http.json" >"$tmp/http.dat"
title=$(jq -r '"prompt \(.shared_prefix + .prompt_len) words, \(.max_tokens) tokens per request, \(.requests_per_level) requests per level\(if .stream then ", streaming" else "" end)"' "$dir/http.json")
xmax=$(jq '[.levels[].concurrency] | max * 1.3' "$dir/http.json")
inproc=""
if [ -f "$dir/inprocess.json" ]; then
  jq -r '.levels[] | [.concurrency, .e2e_tok_s, .decode_tok_s] | @tsv' "$dir/inprocess.json" >"$tmp/inproc.dat"
  inproc=", '$tmp/inproc.dat' using 1:2 with linespoints lw 2 pt 9 ps 1.5 title 'in process (tessera bench), end to end', '$tmp/inproc.dat' using 1:3 with linespoints lw 1 dt 2 pt 8 title 'in process, steady decode only'"
fi

gnuplot <<EOF
set terminal pngcairo size 960,600 font 'sans,11'
set output '$outdir/throughput.png'
set title "Output throughput vs concurrency\n{/*0.8 $title; $machine}"
set xlabel 'concurrent requests'
set ylabel 'output tokens/s'
set logscale x 2
set xrange [0.8:$xmax]
set xtics (1, 2, 4, 8, 16, 32, 64, 128, 256)
set grid
set key top left box opaque
set yrange [0:*]
plot '$tmp/http.dat' using 1:2 with linespoints lw 2 pt 7 ps 1.5 title 'over HTTP (tessera loadgen)'$inproc
EOF

gnuplot <<EOF
set terminal pngcairo size 960,600 font 'sans,11'
set output '$outdir/latency.png'
set multiplot layout 1,2 title "Latency percentiles vs concurrency, over HTTP\n{/*0.8 $title; $machine}"
set logscale x 2
set xrange [0.8:$xmax]
set xtics (1, 2, 4, 8, 16, 32, 64, 128, 256)
set xlabel 'concurrent requests'
set grid
set key top left box opaque
set yrange [0:*]
set title 'time to first token'
set ylabel 'TTFT (ms)'
plot '$tmp/http.dat' using 1:4 with linespoints lw 2 pt 7 title 'p50', \
     '' using 1:5 with linespoints lw 2 pt 5 title 'p90', \
     '' using 1:6 with linespoints lw 2 pt 9 title 'p99'
set title 'inter-token latency'
set ylabel 'ITL (ms)'
plot '$tmp/http.dat' using 1:7 with linespoints lw 2 pt 7 title 'p50', \
     '' using 1:8 with linespoints lw 2 pt 5 title 'p90', \
     '' using 1:9 with linespoints lw 2 pt 9 title 'p99'
unset multiplot
EOF

if [ -f "$dir/mixed.json" ] && jq -e '.levels[-1].classes' "$dir/mixed.json" >/dev/null; then
  jq -r '.levels[-1].classes | to_entries[] | select(.value.sent > 0)
         | [.key + " (\(.value.ok)/\(.value.sent) ok)", .value.ttft_ms.p50, .value.ttft_ms.p90,
            .value.ttft_ms.p99, .value.latency_ms.p99] | map(. // 0) | @tsv' \
    "$dir/mixed.json" >"$tmp/mixed.dat"
  mtitle=$(jq -r '"\(.levels[-1].concurrency) in flight, \(.requests_per_level) requests, mix " + ([.mix | to_entries[] | "\(.key) \(.value)"] | join(" / "))' "$dir/mixed.json")
  gnuplot <<EOF
set terminal pngcairo size 960,600 font 'sans,11'
set output '$outdir/priority.png'
set title "Latency by priority class under mixed load (past saturation)\n{/*0.8 $mtitle; $machine}"
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set datafile separator '\t'
set ylabel 'milliseconds'
set xlabel 'priority class (requests completed / sent)'
set grid ytics
set key top left box opaque
set yrange [0:*]
plot '$tmp/mixed.dat' using 2:xtic(1) title 'TTFT p50', '' using 3 title 'TTFT p90', \
     '' using 4 title 'TTFT p99', '' using 5 title 'request latency p99'
EOF
fi
ls "$outdir"/*.png
