"""Turn an Amaranth component into the three files the flows read.

- `<name>.il`     RTLIL: what synthesis reads (smaller netlists than going through Verilog).
- `<name>.v`      Amaranth's own Verilog (built-in Yosys 0.50), for other tools.
- `<name>_sim.v`  the simulation form. Under cocotb's `iverilog -g2012`, the declaration
                  initialisers of Amaranth's Verilog give no time-0 event, so `always @*` outputs
                  stay X (amaranth-lang/amaranth#1629). Re-emitting the RTLIL through Yosys
                  `proc; opt_clean; write_verilog -noattr` gives Verilog that Icarus and
                  Verilator both evaluate from time 0.

The component is elaborated once: both Verilog files come from the one RTLIL text (elaborating
the CI's accelerator top takes about 17 s of CPU, and took 372 s before the engine's drain was
fixed: docs/toolchain.md, trap 24).

The simulation Verilog is cached under build/cache/sim_verilog/, one file per SHA-256 of the
Yosys build (`yosys -V`), the conversion script and the RTLIL text: a case that elaborates the
same design (same parameters, same source) reuses the file another case wrote, and any change
to the design changes the RTLIL and so the key. Concurrent emitters (pytest-xdist workers) take
an entry's lock file in turn and write the entry through a temporary file and a rename, so a
reader never sees half a file. Deleting build/cache/ is always safe.

Elaboration itself (Amaranth building the netlist and writing RTLIL) is the longest part of
emitting a big block. A caller that passes a `Design` (the component's class and plain-data
constructor arguments) instead of a built component lets `emit_rtl` reuse the RTLIL of an
earlier identical elaboration from build/cache/rtlil/, keyed on the SHA-256 of the class, the
arguments, the top-level name and a fingerprint of every source file that could take part (all
of edgexpert's Python and YAML files, all of Amaranth's, the Python and numpy versions): editing
any of them elaborates again.

Files in `out_dir` are rewritten only when their content changes, so simulator build caches stay
valid.
"""

from __future__ import annotations

import fcntl
import functools
import hashlib
import json
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field, fields, is_dataclass
from enum import Enum
from importlib import metadata, util
from pathlib import Path

import amaranth
from amaranth.back import rtlil, verilog

from ..support.tools import ToolError, build_root, require

__all__ = ["Design", "EmittedRtl", "emit_rtl", "emit_rtlil", "rtlil_cache", "sim_verilog_cache",
           "write_if_changed"]

#: the Yosys passes that turn RTLIL into the simulation form (why: the module docstring)
SIM_SCRIPT = "proc; opt_clean; write_verilog -noattr"


@dataclass(frozen=True)
class EmittedRtl:
    toplevel: str
    rtlil: Path
    verilog: Path
    sim_verilog: Path


@dataclass(frozen=True, eq=False)
class Design:
    """A component not built yet: `cls(*args, **kwargs)`. The arguments must be plain data (int,
    float, str, bool, None, Enum members, and lists, tuples, str-keyed dicts and dataclass
    instances of them), so that they, with the source, determine the RTLIL."""
    cls: type
    args: tuple = ()
    kwargs: dict = field(default_factory=dict)

    def build(self):
        return self.cls(*self.args, **self.kwargs)


def _plain(value):
    """`value` as JSON data that tells apart every argument value `Design` accepts (types
    included: a tuple is not a list, a dataclass names its class)."""
    if value is None or isinstance(value, (bool, int, float, str)) and not isinstance(value, Enum):
        return [type(value).__name__, value]
    if isinstance(value, Enum):
        return ["enum", f"{type(value).__module__}.{type(value).__qualname__}", value.name]
    if isinstance(value, (list, tuple)):
        return [type(value).__name__, [_plain(v) for v in value]]
    if isinstance(value, dict) and all(isinstance(k, str) for k in value):
        return ["dict", {k: _plain(v) for k, v in value.items()}]
    if is_dataclass(value) and not isinstance(value, type):
        return ["dataclass", f"{type(value).__module__}.{type(value).__qualname__}",
                {f.name: _plain(getattr(value, f.name)) for f in fields(value)}]
    raise TypeError(f"Design arguments must be plain data: {type(value).__qualname__} is not")


#: the packages whose folders setup.py maps into edgexpert (its ROOTS): their files are the
#: source a component's elaboration can run
_SOURCE_PACKAGES = ("edgexpert", "edgexpert.hw", "edgexpert.golden", "edgexpert.sim",
                    "edgexpert.synth", "edgexpert.cocotb_tests", "edgexpert.formal")


@functools.cache
def _source_fingerprint() -> str:
    """SHA-256 over every Python and YAML file of edgexpert's packages and every Python file of
    Amaranth, with the Python and numpy versions (once per process: the suite's source does
    not change while it runs)."""
    digest = hashlib.sha256(f"{sys.version}\0numpy {metadata.version('numpy')}".encode())
    folders = [Path(amaranth.__file__).parent]
    for name in _SOURCE_PACKAGES:
        folders += [Path(p) for p in util.find_spec(name).submodule_search_locations]
    for folder in folders:
        for path in sorted(p for pattern in ("*.py", "*.yaml") for p in folder.rglob(pattern)):
            digest.update(f"\0{path.relative_to(folder)}\0".encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()


def rtlil_cache() -> Path:
    """The folder of cached RTLIL, one `<sha256>.il` per elaborated `Design`."""
    return build_root() / "cache" / "rtlil"


def write_if_changed(path: Path, text: str) -> bool:
    """Write `text` to `path` unless it already holds exactly that; True when written."""
    if path.is_file() and path.read_text() == text:
        return False
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return True


def sim_verilog_cache() -> Path:
    """The folder of cached simulation Verilog, one `<sha256>.v` per converted RTLIL text."""
    return build_root() / "cache" / "sim_verilog"


@functools.cache
def _yosys_build(yosys: str) -> str:
    """`yosys -V`: version and git hash, so a different Yosys build never reuses a file."""
    return subprocess.run([yosys, "-V"], capture_output=True, text=True, check=True).stdout.strip()


def _write_atomically(path: Path, text: str) -> None:
    """Write through a temporary file in the same folder and a rename: readers see the old
    file or the whole new one, never a part."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _convert_sim_verilog(yosys: str, rtlil_text: str) -> str:
    with tempfile.TemporaryDirectory() as tmp:
        il, out = Path(tmp) / "top.il", Path(tmp) / "top_sim.v"
        il.write_text(rtlil_text)
        run = subprocess.run([yosys, "-q", "-p", f"read_rtlil {il}; {SIM_SCRIPT} {out}"],
                             capture_output=True, text=True)
        if run.returncode:
            raise ToolError(f"yosys could not convert RTLIL to simulation Verilog:\n{run.stderr}")
        # the first line names the Yosys build; dropping it keeps the file identical across hosts
        return "".join(out.read_text().splitlines(keepends=True)[1:])


def _cached(cache: Path, key: str, suffix: str, make) -> str:
    """The text of entry `key` in `cache`: read, else made by `make()` and written. One lock
    per entry: two workers asking for the same entry make it once; different entries at once."""
    cache.mkdir(parents=True, exist_ok=True)
    entry = cache / f"{key}{suffix}"
    with open(cache / f"{key}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if entry.is_file():
            return entry.read_text()
        text = make()
        _write_atomically(entry, text)
        return text


def _sim_verilog(rtlil_text: str) -> str:
    """The simulation Verilog of `rtlil_text`: from the cache, else converted and cached."""
    yosys = require("yosys").location
    key = hashlib.sha256("\0".join([_yosys_build(yosys), SIM_SCRIPT, rtlil_text]).encode())
    return _cached(sim_verilog_cache(), key.hexdigest(), ".v",
                   lambda: _convert_sim_verilog(yosys, rtlil_text))


def _rtlil(component, toplevel: str) -> str:
    # emit_src=False: source locations carry absolute paths, which would make the files differ
    # between checkouts and defeat caching by content
    if not isinstance(component, Design):
        return rtlil.convert(component, name=toplevel, emit_src=False)
    design = {"class": f"{component.cls.__module__}.{component.cls.__qualname__}",
              "args": _plain(component.args), "kwargs": _plain(component.kwargs),
              "toplevel": toplevel, "source": _source_fingerprint()}
    key = hashlib.sha256(json.dumps(design, sort_keys=True).encode()).hexdigest()
    return _cached(rtlil_cache(), key, ".il",
                   lambda: rtlil.convert(component.build(), name=toplevel, emit_src=False))


def emit_rtlil(component, toplevel: str, out_dir: Path) -> tuple[Path, str]:
    """Write only the RTLIL of `component` (a built component or a `Design`) into `out_dir`:
    what the formal flow reads (its `Assert`s are `$check` cells, which the simulation form's
    Yosys 0.23 cannot read). Returns the file and its text."""
    rtlil_text = _rtlil(component, toplevel)
    path = Path(out_dir) / f"{toplevel}.il"
    write_if_changed(path, rtlil_text)
    return path, rtlil_text


def emit_rtl(component, toplevel: str, out_dir: Path) -> EmittedRtl:
    """Write the RTLIL, Verilog and simulation Verilog of `component` (a built component, or a
    `Design` whose RTLIL may come from the cache) into `out_dir`."""
    out_dir = Path(out_dir)
    rtlil_path, rtlil_text = emit_rtlil(component, toplevel, out_dir)
    files = EmittedRtl(toplevel, rtlil_path, out_dir / f"{toplevel}.v",
                       out_dir / f"{toplevel}_sim.v")
    # what verilog.convert(component, name=toplevel, emit_src=False) returns in Amaranth 0.5.10
    # (pinned in pyproject.toml), without elaborating the component a second time;
    # tests/test_emit.py checks that the two agree
    write_if_changed(files.verilog, verilog._convert_rtlil_text(rtlil_text))
    write_if_changed(files.sim_verilog, _sim_verilog(rtlil_text))
    return files
