#!/usr/bin/env bash
# unit.sh UNIT BINARY: `systemd-analyze verify` on the systemd unit, its ExecStart pointed
# at BINARY (verify checks that it exists). Exit 77 (skipped) without systemd-analyze.
set -euo pipefail
unit=$1 binary=$2
if ! command -v systemd-analyze >/dev/null; then
  echo "skip: systemd-analyze is not installed (Debian package systemd)"
  exit 77
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
sed "s#/usr/local/bin/tessera#$binary#" "$unit" >"$tmp/tessera.service"
grep -q "^ExecStart=$binary serve " "$tmp/tessera.service" || { echo "FAIL no ExecStart"; exit 1; }
# verify exits 0 on many warnings (an unknown Restart= value, say): any output fails.
# --man=no: the manual page is not installed here.
out=$(systemd-analyze verify --man=no "$tmp/tessera.service" 2>&1) || { echo "FAIL $out"; exit 1; }
[ -z "$out" ] || { echo "FAIL systemd-analyze verify: $out"; exit 1; }
for key in DynamicUser=yes Restart=on-failure "--host 127.0.0.1" "LoadCredential=api-keys.json:"; do
  grep -q -- "$key" "$tmp/tessera.service" || { echo "FAIL the unit lacks $key"; exit 1; }
done
echo "ok   systemd-analyze verify: no findings"
