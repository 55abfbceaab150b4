#!/usr/bin/env bash
# install.sh BUILD_DIR: `cmake --install` into a temporary prefix, then the installed binary
# run from an empty directory with no model variables set: generate finds the installed
# default model beside the binary (not the source tree's), and serve --config with the
# installed example config answers /v1/models. Also checks the licence, manual page, docs
# (DEPLOY.md among them) and the installed unit: its ExecStart, and `systemd-analyze
# verify` clean under this non-standard prefix. Loopback only; bounded in time.
set -euo pipefail
build=$(cd "$1" && pwd)
tmp=$(mktemp -d)
pid=
cleanup() {
  [ -n "$pid" ] && kill "$pid" 2>/dev/null
  rm -rf "$tmp"
}
trap cleanup EXIT
fail() { echo "FAIL $*" >&2; exit 1; }
prefix=$tmp/prefix
cmake --install "$build" --prefix "$prefix" >/dev/null
for f in bin/tessera share/tessera/models/stories260K.gguf share/tessera/models/stories260K.LICENSE \
         share/man/man1/tessera.1 share/doc/tessera/LICENSE share/doc/tessera/API.md \
         share/doc/tessera/DEPLOY.md \
         share/tessera/tessera.json share/tessera/tessera.service; do
  [ -f "$prefix/$f" ] || fail "not installed: $f"
done
grep -q "^ExecStart=$prefix/bin/tessera serve " "$prefix/share/tessera/tessera.service" ||
  fail "the installed unit does not run $prefix/bin/tessera"
# Under this prefix man(1) cannot find the page: the unit links the installed file, and
# verify (manual page check on) has nothing to say.
grep -qx "Documentation=file:$prefix/share/man/man1/tessera.1" "$prefix/share/tessera/tessera.service" ||
  fail "the installed unit does not link $prefix/share/man/man1/tessera.1"
if command -v systemd-analyze >/dev/null; then
  out=$(systemd-analyze verify "$prefix/share/tessera/tessera.service" 2>&1) || fail "verify: $out"
  [ -z "$out" ] || fail "systemd-analyze verify on the installed unit: $out"
  echo "ok   the unit installed under $prefix verifies cleanly"
else
  echo "note: systemd-analyze is not installed; the installed unit was not verified"
fi

mkdir "$tmp/work"
cd "$tmp/work"
out=$(env -u TESSERA_MODEL -u TESSERA_MODELS "$prefix/bin/tessera" generate -p "Once upon a time" -n 8 2>&1) ||
  fail "installed generate: $out"
grep -q "loaded $prefix/share/tessera/models/stories260K.gguf" <<<"$out" ||
  fail "installed generate did not use the installed model: $out"
grep -q "Once upon a time, there was" <<<"$out" || fail "installed generate: $out"
echo "ok   installed generate uses $prefix/share/tessera/models/stories260K.gguf"

env -u TESSERA_MODEL -u TESSERA_MODELS "$prefix/bin/tessera" serve \
  --config "$prefix/share/tessera/tessera.json" --port 0 --threads 1 2>"$tmp/serve.log" &
pid=$!
port=
for _ in $(seq 100); do
  port=$(sed -n 's#.*listening on http://127.0.0.1:\([0-9]*\).*#\1#p' "$tmp/serve.log" 2>/dev/null || true)
  [ -n "$port" ] && break
  kill -0 "$pid" 2>/dev/null || fail "serve --config exited: $(cat "$tmp/serve.log")"
  sleep 0.1
done
[ -n "$port" ] || fail "serve --config did not start: $(cat "$tmp/serve.log")"
models=$(curl -sf "http://127.0.0.1:$port/v1/models") || fail "GET /v1/models"
grep -q '"id":"stories260K"' <<<"$models" || fail "/v1/models: $models"
kill "$pid"
wait "$pid" || fail "serve did not exit 0 on SIGTERM"
pid=
echo "ok   installed serve --config tessera.json answers /v1/models"
