#!/usr/bin/env bash
# deploy_example.sh TESSERA: scripts/cluster.sh with the example config of docs/DEPLOY.md
# (its binary, state and ports moved to this run; its model, absent here, kept), so the
# example in the docs is the one tested. nginx-conf lists exactly its 3 replicas; start
# fails on replica 0 (the model file is missing) and names replica 0, not a replica past
# the last; status and stop speak of replicas 0-2 only. Exit 77 without nginx.
set -euo pipefail
bin=$(realpath "$1")
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
command -v nginx >/dev/null || { echo "skip: nginx is not installed (apt-get install nginx-light)"; exit 77; }
tmp=$(mktemp -d)
trap 'scripts_cluster stop >/dev/null 2>&1 || true; rm -rf "$tmp"' EXIT
scripts_cluster() { "$repo/scripts/cluster.sh" "$1" "$tmp/cluster.conf"; }
fails=0
check() { # check NAME CONDITION-COMMAND...
  local name=$1; shift
  if "$@"; then echo "ok   $name"; else echo "FAIL $name"; fails=$((fails + 1)); fi
}

# The first cluster.conf heredoc of DEPLOY.md, as printed there.
awk '/^cat > cluster.conf <<.EOF.$/ { on = 1; next } on && /^EOF$/ { exit } on { print }' \
  "$repo/docs/DEPLOY.md" >"$tmp/example.conf"
check "DEPLOY.md has the example config" grep -q '^replicas *= *3' "$tmp/example.conf"
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
sed -e "s#^binary .*#binary = $bin#" -e "s#^state .*#state = $tmp/state#" \
    -e "s#^base_port .*#base_port = $((port + 1))#" -e "s#^listen .*#listen = 127.0.0.1:$port#" \
    -e "s#^api_keys .*##" "$tmp/example.conf" >"$tmp/cluster.conf"

scripts_cluster nginx-conf >"$tmp/nginx.conf"
check "nginx-conf lists the example's 3 replicas" \
  test "$(grep -c "server 127.0.0.1:[0-9]* max_fails" "$tmp/nginx.conf")" = 3

st=0
(cd "$tmp" && scripts_cluster start) >"$tmp/start.out" 2>&1 || st=$?
check "start fails without the example's model" test "$st" != 0
check "start names replica 0 as the one that did not start" \
  grep -q "cluster: replica 0 did not start" "$tmp/start.out"
check "start never names a replica past the last" bash -c "! grep -q 'replica 3' '$tmp/start.out'"
scripts_cluster status >"$tmp/status.out" 2>&1 || true
check "status lists replicas 0-2" \
  test "$(grep -c '^replica [012] ' "$tmp/status.out")" = 3
check "status names no replica 3" bash -c "! grep -q 'replica 3' '$tmp/status.out'"
check "no replica left running" bash -c "! grep -q 'pid' '$tmp/status.out'"

echo "$fails failures"
[ "$fails" = 0 ]
