#!/usr/bin/env bash
# Set up (idempotent) and run the main job on the bundled defaults. Extra arguments go to
# `edgexpert demo`, e.g. `bash scripts/demo.sh --json`.
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bash "$repo/scripts/setup.sh" >&2
cd "$repo"
exec "${EDGEXPERT_VENV:-$repo/.venv}/bin/edgexpert" demo "$@"
