#!/usr/bin/env bash
# Builds the libFuzzer targets (clang, ASan + UBSan, in build-fuzz/) and runs every target
# for SECONDS each (default 30) on a fresh copy of its corpus: the hand-written files in
# tests/fuzz/corpus/<target>/ plus seeds made from ../shared at run time (never copied
# into the repository). Exits non-zero if any target finds a crash, a leak, a timeout or a
# broken property; the input that did it is kept in build-fuzz/crashes/.
#   scripts/fuzz.sh [SECONDS] [TARGET...]
#   FUZZ_JOBS=N runs N targets at once (default: the number of cores).
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-30}
shift || true
scripts/setup.sh --fuzz

root=$PWD
shared=$(cd "${TESSERA_SHARED:-$root/../shared}" && pwd)
export TESSERA_SHARED=$shared
build=build-fuzz
cmake -S . -B "$build" -DCMAKE_C_COMPILER=clang -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DTESSERA_FUZZ=ON -DTESSERA_SANITIZE=ON -DTESSERA_FORCE_REF=ON \
  -DTESSERA_BUILD_TESTS=OFF -DTESSERA_BUILD_BENCH=OFF -DTESSERA_SHARED_DIR="$shared" >/dev/null
cmake --build "$build" -j "$(nproc)"

targets=("$@")
if ((${#targets[@]} == 0)); then
  for src in tests/fuzz/fuzz_*.c; do
    targets+=("$(basename "$src" .c)")
  done
fi

work=$build/work
mkdir -p "$build/crashes" "$build/logs"

# Copies shared file $1 into dir $2, optionally with prefix byte(s) $3 (printf format).
seed() {
  local src=$shared/$1 dst=$2/shared-$(basename "$1")
  [ -f "$src" ] || return 0
  { [ -z "${3:-}" ] || printf "$3"; cat "$src"; } >"$dst"
}

# Splits a llama.cpp tokenizer test input file into one seed per test text, each behind
# the mode byte 0 (plain text) that the tokenizer targets read first.
seed_vocab_tests() {
  local src=$shared/$1 dir=$2 i=0
  [ -f "$src" ] || return 0
  awk -v out="$dir/shared-$(basename "$1")" \
    '/^__ggml_vocab_test__$/ { n++; next } { f = out "." n; printf "%s%s", (seen[n]++ ? "\n" : ""), $0 > f }' "$src"
  for f in "$dir"/shared-"$(basename "$1")".*; do
    [ -f "$f" ] || continue
    { printf '\0'; cat "$f"; } >"$f.seed" && rm "$f"
    i=$((i + 1))
  done
}

make_corpus() {
  local t=$1 dir=$work/$1
  rm -rf "$dir"
  mkdir -p "$dir"
  [ -d "tests/fuzz/corpus/$t" ] && cp "tests/fuzz/corpus/$t"/* "$dir"/
  case $t in
    fuzz_gguf)
      seed models/stories260K/stories260K.gguf "$dir"
      seed vocab/ggml-vocab-llama-spm.gguf "$dir"
      seed vocab/ggml-vocab-gpt-2.gguf "$dir"
      # a model in llama.cpp's quantized types (Q4_K and Q6_K), from its archive
      k=$shared/models/stories260K-k.tar.xz
      [ ! -f "$k" ] || tar xJf "$k" -O stories260K-k/stories260K-k-Q4_K_M.gguf \
        >"$dir/shared-stories260K-k-Q4_K_M.gguf" ;;
    fuzz_llama2c_model)
      seed models/stories260K/stories260K.bin "$dir"
      if [ -f "$shared/models/stories260K/stories260K.bin" ]; then
        { cat "$shared/models/stories260K/stories260K.bin"; printf TSTOKBIN
          cat "$shared/models/stories260K/tok512.bin"; } >"$dir/shared-stories260K-with-tok512"
      fi ;;
    fuzz_llama2c_tokenizer)
      seed models/stories260K/tok512.bin "$dir"
      seed models/llama2-tokenizer/tokenizer.bin "$dir" ;;
    fuzz_tokenizer_spm)
      seed_vocab_tests vocab/ggml-vocab-llama-spm.gguf.inp "$dir" ;;
    fuzz_tokenizer_bpe)
      seed_vocab_tests vocab/ggml-vocab-gpt-2.gguf.inp "$dir" ;;
    fuzz_openai_request)
      for f in config.json generation_config.json special_tokens_map.json tokenizer_config.json; do
        seed "models/tinystories-656k/$f" "$dir" '\0'
      done ;;
    fuzz_chat_template)
      seed models/tinystories-656k/tokenizer_config.json "$dir" ;;
    fuzz_jinja | fuzz_template_render)
      for f in "$shared"/chat-templates/*.jinja; do
        [ -f "$f" ] && seed "chat-templates/$(basename "$f")" "$dir"
      done ;;
    fuzz_detok_stop)
      for f in "$shared"/reference/stories260K-greedy/*.out; do
        [ -f "$f" ] && { printf '\x02\x01\n\x02. '; cat "$f"; } >"$dir/shared-$(basename "$f")"
      done ;;
  esac
}

# OpenMP keeps its thread pool alive at exit; that is not our leak.
export LSAN_OPTIONS="suppressions=$root/tests/lsan.supp:print_suppressions=0"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"

run_one() {
  local t=$1 log=$build/logs/$1.log
  make_corpus "$t"
  if "$build/$t" -max_total_time="$secs" -rss_limit_mb=2048 -timeout=20 -print_final_stats=1 \
      -artifact_prefix="$build/crashes/$t-" "$work/$t" >"$log" 2>&1; then
    echo "fuzz: $t ok: $(grep -E '^#[0-9]+.*DONE' "$log" | tail -1 | grep -oE 'cov: [0-9]+|exec/s: [0-9]+' | tr '\n' ' ')"
  else
    echo "fuzz: $t FAILED (log $log):"
    grep -E 'ERROR|SUMMARY|property violated|Test unit written' "$log" | head -8
    return 1
  fi
}

jobs=${FUZZ_JOBS:-$(nproc)}
failed=0
pids=()
names=()
for t in "${targets[@]}"; do
  [ -x "$build/$t" ] || { echo "fuzz: no target $t" >&2; exit 2; }
  run_one "$t" &
  pids+=($!)
  names+=("$t")
  if ((${#pids[@]} >= jobs)); then
    wait "${pids[0]}" || failed=1
    pids=("${pids[@]:1}")
  fi
done
for p in "${pids[@]}"; do
  wait "$p" || failed=1
done
if ((failed)); then
  echo "fuzz: crashes kept in $build/crashes/" >&2
  exit 1
fi
echo "fuzz: every target ran ${secs} s without a finding"
