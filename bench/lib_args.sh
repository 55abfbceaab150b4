# shellcheck shell=bash
# bench/lib_args.sh: the options bench/compare.sh and bench/cluster_bench.sh share, and their
# defaults. Sourced, after root is set; not run.
#
#   -n N  -o DIR  -m MODEL  --prompt-len L  --max-tokens M  --replicas R  --build DIR
#
# `bench_option LINES "$@"` takes the option in $1 (and its value in $2) and sets bench_used
# to how many words it took; a caller's loop handles its own options first and shifts by
# bench_used after this one. -h/--help prints lines LINES (a sed range) of the calling
# script without their leading '# ' and exits 0; any other word is an unknown option:
# a message naming the script, and exit 2.
# shellcheck disable=SC2034,SC2154 # the sourcing script sets root and reads the rest
build=$root/build
conc=16
out=""
model=""
prompt_len=32
max_tokens=64
replicas=3

bench_option() {
  local help=$1
  shift
  bench_used=2
  case $1 in
    -n) conc=$2 ;;
    -o) out=$2 ;;
    -m) model=$2 ;;
    --prompt-len) prompt_len=$2 ;;
    --max-tokens) max_tokens=$2 ;;
    --replicas) replicas=$2 ;;
    --build) build=$2 ;;
    -h|--help) sed -n "${help}p" "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "${0##*/}: unknown option $1" >&2; exit 2 ;;
  esac
}
