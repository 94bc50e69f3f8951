#!/usr/bin/env bash
# Set up (idempotent) and run every test: plain Python tests and the cocotb benches on Icarus and
# Verilator. Extra arguments go to pytest, e.g. `bash scripts/test.sh -k mac_lane`.
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bash "$repo/scripts/setup.sh"
cd "$repo"
start=$(date +%s)
# two workers for two cores: every cocotb case builds in a folder of its own. Short tracebacks:
# a failure's own message (a simulator's log tail, a value against golden's) comes right after
# its test's name, where a CI log cut to its first failure still shows it (`--tb=long` after
# this script's name overrides)
"${EDGEXPERT_VENV:-$repo/.venv}/bin/python" -m pytest -n 2 --tb=short "$@"
echo "tests: wall time $(( $(date +%s) - start )) s"
