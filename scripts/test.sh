#!/usr/bin/env bash
# Set up (idempotent) and run every test: plain Python tests and the cocotb benches on Icarus and
# Verilator. Extra arguments go to pytest, e.g. `bash scripts/test.sh -k mac_lane`.
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bash "$repo/scripts/setup.sh"
cd "$repo"
start=$(date +%s)
# two workers for two cores: every cocotb case builds in a folder of its own
"${EDGEXPERT_VENV:-$repo/.venv}/bin/python" -m pytest -n 2 "$@"
echo "tests: wall time $(( $(date +%s) - start )) s"
