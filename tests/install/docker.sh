#!/usr/bin/env bash
# docker.sh: the Dockerfile. Always: its final stage is debian:12-slim, runs as a user that
# is not root, declares the /models volume and a HEALTHCHECK on /health, installs the
# package that scripts/package.sh builds. Where a container engine (docker or podman) has a
# usable daemon: builds the image, runs it on a loopback port, waits for /health and for
# the engine to call it healthy, checks the process's user, answers a completion. Exits 77
# (skipped), saying why, where no engine is usable.
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
df=$repo/Dockerfile
fail() { echo "FAIL $*" >&2; exit 1; }
[ -f "$df" ] || fail "no Dockerfile"
# The runtime stage, continuation lines joined.
final=$(sed -e ':a' -e '/\\$/{N;s/\\\n//;ba' -e '}' "$df" | awk '/^FROM /{ n++ } n >= 2')
grep -q '^FROM debian:12-slim$' <<<"$final" || fail "the final stage is not debian:12-slim"
grep -q '^FROM debian:12 AS build$' "$df" || fail "no build stage"
user=$(sed -n 's/^USER \(.*\)/\1/p' <<<"$final")
[ -n "$user" ] && [ "$user" != root ] && [ "$user" != 0 ] || fail "the image runs as root"
grep -q '^VOLUME \["/models"\]$' <<<"$final" || fail "no /models volume"
grep -q '^HEALTHCHECK .*http://127.0.0.1:8080/health' <<<"$final" || fail "no HEALTHCHECK on /health"
grep -q 'scripts/package.sh' "$df" && grep -q 'tessera_\*.deb' <<<"$final" ||
  fail "the image does not install the package"
echo "ok   Dockerfile: multi-stage, debian:12-slim, user $user, /models volume, HEALTHCHECK /health"

engine=
for e in docker podman; do
  if command -v "$e" >/dev/null && "$e" info >/dev/null 2>&1; then engine=$e; break; fi
done
if [ -z "$engine" ]; then
  why="neither docker nor podman is installed"
  command -v docker >/dev/null && why="docker is installed but its daemon does not answer (docker info fails)"
  command -v podman >/dev/null && why="podman is installed but podman info fails"
  echo "SKIP: the image was not built: $why"
  exit 77
fi
# The base images come from a registry; a machine that cannot reach one cannot build.
for base in debian:12 debian:12-slim; do
  if ! "$engine" image inspect "$base" >/dev/null 2>&1 && ! "$engine" pull -q "$base" >/dev/null 2>&1; then
    echo "SKIP: the image was not built: $engine has no $base and cannot pull it (no registry)"
    exit 77
  fi
done
tag=tessera-test:$$
name=tessera-test-$$
trap '"$engine" rm -f "$name" >/dev/null 2>&1; "$engine" rmi "$tag" >/dev/null 2>&1' EXIT
"$engine" build -q -t "$tag" --build-arg GIT_COMMIT=test "$repo" >/dev/null || fail "$engine build"
echo "ok   $engine build"
"$engine" run -d --name "$name" -p 127.0.0.1::8080 "$tag" >/dev/null || fail "$engine run"
port=$("$engine" port "$name" 8080 | head -1 | sed 's/.*://')
for _ in $(seq 120); do curl -sf "http://127.0.0.1:$port/health" >/dev/null && break; sleep 0.5; done
curl -sf "http://127.0.0.1:$port/health" | grep -q '"status":"ok"' || fail "/health: $("$engine" logs "$name" 2>&1 | tail -5)"
[ "$("$engine" exec "$name" id -u)" != 0 ] || fail "the server runs as root"
answer=$(curl -sf "http://127.0.0.1:$port/v1/completions" -H 'Content-Type: application/json' \
  -d '{"prompt": "Once upon a time", "max_tokens": 8}') || fail "POST /v1/completions"
grep -q '"completion_tokens"' <<<"$answer" || fail "completion: $answer"
health=
for _ in $(seq 60); do
  health=$("$engine" inspect -f '{{.State.Health.Status}}' "$name" 2>/dev/null || true)
  [ "$health" = healthy ] && break
  sleep 1
done
[ "$health" = healthy ] || fail "the engine's health check says '$health'"
echo "ok   the container serves, as a user that is not root, and is healthy"
