#!/usr/bin/env bash
# pull.sh TESSERA MODEL: `tessera pull` against a loopback hub (hub.py): picks the quant
# from the file list, follows the redirect, resumes after a dropped connection and from a
# partial file, checks the sha256 (a wrong one fails and leaves nothing), refuses split
# files, unknown quants, missing repositories and bad references; and the hostile hub's
# tricks: an endless body, a 2 KB/s drip, an HTML page for a GGUF, a symlinked .part file,
# a same-size file of other bytes, ESC and newlines in names; an unreachable hub named
# with $HF_ENDPOINT and --endpoint. Loopback only (.invalid never resolves).
set -euo pipefail
bin=$1 model=$2
tmp=$(mktemp -d)
hub=
trap '[ -n "$hub" ] && kill "$hub" 2>/dev/null; rm -rf "$tmp"' EXIT
fails=0
check() { # check NAME CONDITION-COMMAND...
  local name=$1; shift
  if "$@"; then echo "ok   $name"; else echo "FAIL $name"; fails=$((fails + 1)); fi
}
python3 "$(dirname "$0")/hub.py" "$model" "$tmp/port" "$tmp/hub.log" &
hub=$!
for _ in $(seq 100); do [ -s "$tmp/port" ] && break; sleep 0.1; done
ep=http://127.0.0.1:$(cat "$tmp/port")
m=$tmp/models
pull() { "$bin" pull --endpoint "$ep" --model-dir "$m" "$@"; }

st=0; pull test/tiny-GGUF >"$tmp/out" 2>"$tmp/err" || st=$?
check "pull exits 0" test "$st" = 0
check "prints the path" test "$(cat "$tmp/out")" = "$m/tiny.Q4_K_M.gguf"
check "the default quant's file, byte for byte" cmp -s "$m/tiny.Q4_K_M.gguf" "$model"
check "resumed after the dropped connection" grep -qE '^tiny.Q4_K_M.gguf bytes=[0-9]+-$' "$tmp/hub.log"
check "no .part left" test ! -e "$m/tiny.Q4_K_M.gguf.part"
check "served by name from the model directory" bash -c \
  "TESSERA_MODELS='$m' '$bin' generate -m tiny.Q4_K_M -p 'Once upon a time' -n 4 2>/dev/null | grep -q 'Once upon a time,'"

python3 -c "import sys; sys.stdout.buffer.write(open(sys.argv[1],'rb').read()[:1000])" "$model" >"$m/tiny.Q8_0.gguf.part"
st=0; pull test/tiny-GGUF:q8_0 --quiet >/dev/null 2>"$tmp/err" || st=$?
check "pull :q8_0 exits 0" test "$st" = 0
check "resumed from the partial file" grep -qx 'tiny.Q8_0.gguf bytes=1000-' "$tmp/hub.log"
check "the resumed file is whole" test "$(stat -c %s "$m/tiny.Q8_0.gguf")" = $((4096 + 256 * 64))
st=0; pull test/tiny-GGUF:Q8_0 --quiet >/dev/null 2>"$tmp/err" || st=$?
check "a file there already is not fetched again" test "$(grep -c '^tiny.Q8_0' "$tmp/hub.log")" = 1

st=0; pull test/badsum-GGUF >/dev/null 2>"$tmp/err" || st=$?
check "wrong sha256 fails" test "$st" = 1
check "wrong sha256 says so" grep -q "sha256 .* the repository says 0000" "$tmp/err"
check "wrong sha256 leaves nothing" test ! -e "$m/bad.Q4_K_M.gguf" -a ! -e "$m/bad.Q4_K_M.gguf.part"

st=0; pull test/split-GGUF >/dev/null 2>"$tmp/err" || st=$?
check "split files refused" bash -c "test $st = 1 && grep -q 'split into parts' '$tmp/err'"
st=0; pull test/tiny-GGUF:Q5_K_S >/dev/null 2>"$tmp/err" || st=$?
check "unknown quant lists the files" bash -c "test $st = 1 && grep -q 'no Q5_K_S GGUF.*tiny.Q4_K_M.gguf, tiny.Q8_0.gguf' '$tmp/err'"
st=0; pull test/missing >/dev/null 2>"$tmp/err" || st=$?
check "missing repository fails" bash -c "test $st = 1 && grep -q 'tree/main' '$tmp/err'"
st=0; pull not-a-repo >/dev/null 2>&1 || st=$?
check "a bad reference is bad usage" test "$st" = 2

# A file of the listed size but other bytes is hashed, found wrong and fetched again.
python3 -c "import sys; n=len(open(sys.argv[1],'rb').read()); sys.stdout.buffer.write(b'GGUF' + bytes(n - 4))" "$model" >"$m/tiny.Q4_K_M.gguf"
st=0; pull test/tiny-GGUF --quiet >/dev/null 2>"$tmp/err" || st=$?
check "a same-size file of other bytes is fetched again" bash -c "test $st = 0 && cmp -s '$m/tiny.Q4_K_M.gguf' '$model'"

# An endless body stops at the listed 5000 bytes and leaves nothing.
st=0; timeout 60 "$bin" pull --endpoint "$ep" --model-dir "$m" test/endless-GGUF --quiet >/dev/null 2>"$tmp/err" || st=$?
check "an endless body fails" test "$st" = 1
check "an endless body says it ran past the listed size" grep -q "more than the listed 5000 bytes" "$tmp/err"
check "an endless body leaves nothing" test ! -e "$m/endless.Q4_K_M.gguf" -a ! -e "$m/endless.Q4_K_M.gguf.part"

# A 2 KB/s drip is a stalled transfer: it times out (here after 1 s a try) and says so.
t0=$(date +%s)
st=0; timeout 60 "$bin" pull --endpoint "$ep" --model-dir "$m" --stall-seconds 1 test/drip-GGUF --quiet >/dev/null 2>"$tmp/err" || st=$?
check "a drip times out" test "$st" = 1
check "a drip is called stalled" grep -q "stalled: under 16 KiB/s for 1 s" "$tmp/err"
check "a drip gives up within 40 s" test $(( $(date +%s) - t0 )) -lt 40
check "a drip leaves no file in place" test ! -e "$m/drip.Q4_K_M.gguf"

# Without a listed sha256, a body that is not a GGUF is refused before it is renamed.
st=0; pull test/page-GGUF >/dev/null 2>"$tmp/err" || st=$?
check "a non-GGUF body fails" test "$st" = 1
check "a non-GGUF body says so" grep -q "not a GGUF file" "$tmp/err"
check "a non-GGUF body leaves nothing" test ! -e "$m/page.Q4_K_M.gguf" -a ! -e "$m/page.Q4_K_M.gguf.part"

# A .part that is a symbolic link is refused; its target keeps its bytes.
m2=$tmp/models2
mkdir -p "$m2"
printf 'keep me\n' >"$tmp/victim"
ln -s "$tmp/victim" "$m2/tiny.Q4_K_M.gguf.part"
st=0; "$bin" pull --endpoint "$ep" --model-dir "$m2" test/tiny-GGUF --quiet >/dev/null 2>"$tmp/err" || st=$?
check "a symlinked .part fails" test "$st" = 1
check "a symlinked .part says so" grep -q "symbolic link" "$tmp/err"
check "a symlinked .part's target is untouched" test "$(cat "$tmp/victim")" = "keep me"

# Names with ESC and newlines come out escaped, and such a file is not written.
st=0; pull test/esc-GGUF:Q5_K_S >/dev/null 2>"$tmp/err" || st=$?
check "ESC in a listed name is escaped" bash -c "test $st = 1 && grep -qF 'x\\x1b[31m.Q4_K_M.gguf, y\\x0a.Q8_0.gguf' '$tmp/err'"
check "no raw ESC or split line" bash -c "! grep -q \$'\\x1b' '$tmp/err' && test \$(wc -l <'$tmp/err') = 1"
st=0; pull test/esc-GGUF >/dev/null 2>"$tmp/err" || st=$?
check "a name with an ESC is refused" bash -c "test $st = 1 && grep -q 'control characters' '$tmp/err' && ! grep -q \$'\\x1b' '$tmp/err'"
check "no file named with an ESC" bash -c "! ls '$m' | grep -q \$'\\x1b'"

# A hub that does not answer (a closed port, a name that does not resolve) is named, with
# the two ways to point pull at another one.
closed=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
st=0; "$bin" pull --endpoint "http://127.0.0.1:$closed" --model-dir "$m" test/tiny-GGUF >/dev/null 2>"$tmp/err" || st=$?
check "an unreachable --endpoint names \$HF_ENDPOINT and --endpoint" bash -c \
  "test $st = 1 && grep -q '127.0.0.1:$closed' '$tmp/err' && grep -qF '\$HF_ENDPOINT' '$tmp/err' && grep -q -- '--endpoint' '$tmp/err'"
st=0; HF_ENDPOINT=http://hub.invalid "$bin" pull --model-dir "$m" test/tiny-GGUF >/dev/null 2>"$tmp/err" || st=$?
check "an unresolvable \$HF_ENDPOINT is named with the hint" bash -c \
  "test $st = 1 && grep -q 'hub.invalid' '$tmp/err' && grep -qF '\$HF_ENDPOINT' '$tmp/err'"

echo "$fails failures"
[ "$fails" = 0 ]
