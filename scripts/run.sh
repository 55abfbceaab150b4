#!/usr/bin/env bash
# Installs what is missing, builds, and runs the default model.
# The model: $TESSERA_MODEL, else the first models/*.gguf in the repo, else stories260K
# from ../shared. Extra arguments go to tessera.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh build

model=${TESSERA_MODEL:-}
if [ -z "$model" ]; then
  for f in models/*.gguf; do
    [ -e "$f" ] && { model=$f; break; }
  done
fi
model=${model:-../shared/models/stories260K/stories260K.gguf}

exec build/tessera generate -m "$model" -p "${TESSERA_PROMPT:-Once upon a time}" -n 200 "$@"
