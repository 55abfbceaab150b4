#!/usr/bin/env bash
# deb.sh BUILD_DIR: scripts/package.sh builds the Debian package; its contents and declared
# dependencies are checked (apt-get resolves them where it can run), then dpkg installs it
# into a fresh root (its own dpkg database), where the installed binary answers --version
# and `tessera serve` with the packaged config answers a completion on loopback; dpkg
# purges it and nothing of it is left. Exit 77 (skipped) without dpkg-deb/dpkg-shlibdeps,
# or in a sanitizer build, which package.sh refuses.
set -euo pipefail
build=$(cd "$1" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
for tool in dpkg dpkg-deb dpkg-shlibdeps curl jq; do
  command -v "$tool" >/dev/null || { echo "skip: $tool is not installed"; exit 77; }
done
for opt in TESSERA_SANITIZE TESSERA_TSAN; do
  if grep -q "^$opt:BOOL=ON$" "$build/CMakeCache.txt"; then
    echo "skip: a $opt build is not packaged (the normal build's run of this test covers it)"
    exit 77
  fi
done
tmp=$(mktemp -d)
pid=
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; rm -rf "$tmp"' EXIT
fail() { echo "FAIL $*" >&2; exit 1; }

# --allow-native: CI's build is -march=native, and this package never leaves the machine.
deb=$("$here/../../scripts/package.sh" --allow-native "$build" "$tmp") || fail "package.sh"
[ -f "$deb" ] || fail "no package at $deb"
echo "ok   built $(basename "$deb")"
dpkg-deb -c "$deb" >"$tmp/contents"
for f in ./usr/bin/tessera ./usr/share/tessera/models/stories260K.gguf \
         ./usr/share/tessera/models/stories260K.LICENSE ./usr/share/man/man1/tessera.1.gz \
         ./usr/share/doc/tessera/DEPLOY.md ./usr/share/doc/tessera/LICENSE \
         ./usr/share/tessera/tessera.json ./usr/share/tessera/tessera.service; do
  grep -q " $f\$" "$tmp/contents" || fail "the package lacks $f"
done
depends=$(dpkg-deb -f "$deb" Depends)
for lib in libopenblas0-openmp libcjson1 libmicrohttpd12 libcurl4 libc6; do
  grep -q "\b$lib\b" <<<"$depends" || fail "Depends lacks $lib: $depends"
done
echo "ok   contents and Depends: $depends"
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  out=$(apt-get install -s "$deb" 2>&1) || fail "apt-get cannot resolve the package's dependencies: $out"
  grep -q "^Inst tessera" <<<"$out" || fail "apt-get would not install it: $out"
  echo "ok   apt-get resolves its dependencies here"
fi

# A fresh root with its own (empty) dpkg database.
root=$tmp/root
mkdir -p "$root/var/lib/dpkg/info" "$root/var/lib/dpkg/updates"
: >"$root/var/lib/dpkg/status"
dpkg=(dpkg --root="$root" --log=/dev/null --force-not-root --force-depends --force-script-chrootless)
"${dpkg[@]}" -i "$deb" >"$tmp/dpkg.out" 2>&1 || fail "dpkg -i: $(cat "$tmp/dpkg.out")"
"${dpkg[@]}" -s tessera | grep -q "^Status: install ok installed" || fail "not installed"
bin=$root/usr/bin/tessera
unit=$root/usr/share/tessera/tessera.service
grep -q '^ExecStart=/usr/bin/tessera serve ' "$unit" && grep -qx 'Documentation=man:tessera(1)' "$unit" ||
  fail "the packaged unit does not run /usr/bin/tessera or link man:tessera(1)"
ver=$("$bin" --version) || fail "tessera --version"
grep -q "^tessera $(dpkg-deb -f "$deb" Version)\$" <<<"$(head -1 <<<"$ver")" || fail "--version: $ver"
echo "ok   the installed tessera --version: $(head -1 <<<"$ver")"

env -u TESSERA_MODEL -u TESSERA_MODELS "$bin" serve --config "$root/usr/share/tessera/tessera.json" \
  --port 0 --threads 1 2>"$tmp/serve.log" &
pid=$!
port=
for _ in $(seq 100); do
  port=$(sed -n 's#.*listening on http://127.0.0.1:\([0-9]*\).*#\1#p' "$tmp/serve.log" 2>/dev/null || true)
  [ -n "$port" ] && break
  kill -0 "$pid" 2>/dev/null || fail "serve exited: $(cat "$tmp/serve.log")"
  sleep 0.1
done
[ -n "$port" ] || fail "serve did not start: $(cat "$tmp/serve.log")"
answer=$(curl -sf "http://127.0.0.1:$port/v1/completions" -H 'Content-Type: application/json' \
  -d '{"prompt": "Once upon a time", "max_tokens": 8, "temperature": 0}') || fail "POST /v1/completions"
[ "$(jq -r '.usage.completion_tokens' <<<"$answer")" -ge 1 ] &&
  [ -n "$(jq -r '.choices[0].text' <<<"$answer")" ] || fail "completion: $answer"
grep -q "loaded $root/usr/share/tessera/models/stories260K.gguf" "$tmp/serve.log" ||
  fail "serve did not load the packaged model: $(cat "$tmp/serve.log")"
echo "ok   the installed serve answers a completion: $(jq -c '.choices[0].text' <<<"$answer")"
kill "$pid"
wait "$pid" || fail "serve did not exit 0 on SIGTERM"
pid=

"${dpkg[@]}" --purge tessera >"$tmp/dpkg.out" 2>&1 || fail "dpkg --purge: $(cat "$tmp/dpkg.out")"
left=$(find "$root" -path "$root/var/lib/dpkg" -prune -o -type f -print)
[ -z "$left" ] || fail "files left after purge: $left"
"${dpkg[@]}" -s tessera >/dev/null 2>&1 && fail "dpkg still knows tessera after purge"
echo "ok   dpkg --purge leaves nothing"
