#!/usr/bin/env bash
# chat_page.sh: the chat page in a real browser. Starts `tessera serve` with an API key on
# loopback and runs chat_page.cjs, which drives Debian's chromium (headless) through
# puppeteer-core (installed into the build folder on first use). Exits 77 (ctest: skipped)
# with a message where chromium or puppeteer-core cannot be had.
# usage: chat_page.sh TESSERA_BINARY MODEL.gguf BUILD_DIR
set -euo pipefail
bin=$1 model=$2 build=$(cd "$3" && pwd)
here=$(cd "$(dirname "$0")" && pwd)

# start_server LOG ARGS...: tessera serve on a free loopback port; sets spid and port.
start_server() {
  local log=$1; shift
  : >"$log" # exists before the server's shell opens it, or the first sed could race it
  "$bin" serve -m "$model" --host 127.0.0.1 --port 0 "$@" 2>"$log" &
  spid=$!
  port=
  for _ in $(seq 100); do
    port=$(sed -n 's/.*listening on http:\/\/127.0.0.1:\([0-9]*\).*/\1/p' "$log" 2>/dev/null || true)
    [ -n "$port" ] && return 0
    sleep 0.1
  done
  echo "server did not start:"; cat "$log"; exit 1
}
tmp=$(mktemp -d)
spid=
stop_server() {
  [ -n "$spid" ] && kill -TERM "$spid" 2>/dev/null && wait "$spid" 2>/dev/null || true
  spid=
}
trap 'stop_server; rm -rf "$tmp"' EXIT

# --no-ui (without a browser): the page's paths are 404 like any unknown path.
start_server "$tmp/noui.log" --no-ui
for p in / /app.js; do
  code=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port$p")
  [ "$code" = 404 ] || { echo "FAILED: --no-ui still serves $p ($code)"; exit 1; }
done
echo "ok - --no-ui: / and /app.js answer 404"
stop_server

chromium=${TESSERA_CHROMIUM:-$(command -v chromium || true)}
if [ -z "$chromium" ] || [ ! -x "$chromium" ]; then
  echo "SKIP: chromium is not installed (scripts/setup.sh installs it: apt-get install chromium)"
  exit 77
fi
npmdir=$build/npm-web
if ! "$here/../server/npm_modules.sh" "$npmdir" puppeteer-core@24.40.0; then
  echo "SKIP: cannot install puppeteer-core from npm (offline?)"
  exit 77
fi

key=sk-page-test-$$
printf '{"%s": {"tier": "normal", "name": "page"}}\n' "$key" >"$tmp/keys.json"
start_server "$tmp/log" --api-keys "$tmp/keys.json"

rc=0
PUPPETEER_MODULE="$npmdir/node_modules/puppeteer-core" timeout 90 node "$here/chat_page.cjs" \
  --url "http://127.0.0.1:$port" --key "$key" --chromium "$chromium" --tessera "$bin" \
  --model "$model" --out "$build" --profile "$tmp/profile" || rc=$?
if [ "$rc" != 0 ]; then
  echo "chat page test failed ($rc); the server's log ends:"
  tail -n 30 "$tmp/log"
fi
exit "$rc"
