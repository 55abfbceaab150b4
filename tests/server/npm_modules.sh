#!/usr/bin/env bash
# npm_modules.sh NPMDIR PACKAGE@VERSION...: installs the npm packages the client tests use
# into NPMDIR (a folder of the build), once. Tests that ctest runs side by side share
# NPMDIR, so the install holds a lock on it: two npm processes writing one node_modules
# at the same time leave it broken for both.
set -euo pipefail
npmdir=$1
shift
mkdir -p "$npmdir"
exec 9>"$npmdir/.install.lock"
flock 9
missing=()
for spec in "$@"; do
  name=${spec%@*}
  [ -f "$npmdir/node_modules/$name/package.json" ] || missing+=("$spec")
done
[ ${#missing[@]} -eq 0 ] && exit 0
if ! npm install --loglevel=error --no-audit --no-fund --prefix "$npmdir" "${missing[@]}" >/dev/null; then
  echo "npm could not install ${missing[*]} into $npmdir" >&2
  exit 1
fi
