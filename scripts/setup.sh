#!/usr/bin/env bash
# One-shot, idempotent set-up of everything edgexpert needs on a fresh Debian 12 machine:
#   1. Debian packages: iverilog, yosys (synthesis), opensta (timing/power)
#   2. the OSU 0.18 um standard-cell liberty (from the qflow-tech-osu018 .deb, unpacked, not installed)
#   3. a virtual environment in .venv with the package and its pinned dependencies
# A second run only checks and says what it skipped.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
venv="${EDGEXPERT_VENV:-$repo/.venv}"
tech_dir="${EDGEXPERT_TECH_DIR:-${XDG_DATA_HOME:-$HOME/.local/share}/edgexpert/tech}"
python="${PYTHON:-python3}"
start=$(date +%s)

say() { printf 'setup: %s\n' "$*"; }
as_root() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }

# --- 1. Debian packages -------------------------------------------------------------------------
apt_packages=(iverilog yosys opensta)
missing=()
for pkg in "${apt_packages[@]}"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
if [ ${#missing[@]} -eq 0 ]; then
    say "skip apt: ${apt_packages[*]} already installed"
else
    say "apt-get install ${missing[*]}"
    as_root apt-get update -qq
    # --no-install-recommends keeps yosys from pulling a desktop's worth of packages
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# --- 2. osu018 liberty --------------------------------------------------------------------------
liberty="$tech_dir/osu018/osu018_stdcells.lib"
if [ -s "$liberty" ]; then
    say "skip liberty: $liberty present"
else
    say "fetching qflow-tech-osu018 for $liberty"
    work=$(mktemp -d)
    # apt-get download runs as the current user and needs no root; the .deb is only unpacked
    (cd "$work" && apt-get download -qq qflow-tech-osu018 2>/dev/null) || {
        as_root apt-get update -qq
        (cd "$work" && apt-get download -qq qflow-tech-osu018)
    }
    dpkg-deb -x "$work"/qflow-tech-osu018_*.deb "$work/root"
    mkdir -p "$tech_dir/osu018"
    cp "$work/root/usr/share/qflow/tech/osu018/osu018_stdcells.lib" "$liberty"
    rm -rf "$work"
fi

# --- 3. virtual environment ---------------------------------------------------------------------
if [ ! -x "$venv/bin/python" ]; then
    say "creating virtual environment $venv"
    "$python" -m venv "$venv"
fi
# Reinstall only when the packaging changed: the stamp is the hash of pyproject.toml and setup.py.
stamp="$venv/.edgexpert-installed"
want=$(cat "$repo/pyproject.toml" "$repo/setup.py" | sha256sum | cut -d' ' -f1)
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && "$venv/bin/python" -c "import edgexpert" 2>/dev/null; then
    say "skip pip: $venv is up to date with pyproject.toml"
else
    say "pip install -e '.[test]' into $venv"
    "$venv/bin/python" -m pip install -q --upgrade pip
    # torch first and alone, pinned: it must come from the local CPU wheel, never a CUDA build
    "$venv/bin/python" -m pip install -q "torch==2.13.0"
    "$venv/bin/python" -m pip install -q -e "$repo[test]"
    echo "$want" > "$stamp"
fi

say "done in $(( $(date +%s) - start )) s; activate with: source $venv/bin/activate"
