"""Turn an Amaranth component into the three files the flows read.

- `<name>.il`     RTLIL: what synthesis reads (smaller netlists than going through Verilog).
- `<name>.v`      Amaranth's own Verilog (built-in Yosys 0.50), for other tools.
- `<name>_sim.v`  the simulation form. Under cocotb's `iverilog -g2012`, the declaration
                  initialisers of Amaranth's Verilog give no time-0 event, so `always @*` outputs
                  stay X (amaranth-lang/amaranth#1629). Re-emitting the RTLIL through Yosys
                  `proc; opt_clean; write_verilog -noattr` gives Verilog that Icarus and
                  Verilator both evaluate from time 0.

The component is elaborated once: both Verilog files come from the one RTLIL text (Amaranth's
elaboration of the accelerator top takes minutes, docs/toolchain.md).

The simulation Verilog is cached under build/cache/sim_verilog/, one file per SHA-256 of the
Yosys build (`yosys -V`), the conversion script and the RTLIL text: a case that elaborates the
same design (same parameters, same source) reuses the file another case wrote, and any change
to the design changes the RTLIL and so the key. Concurrent emitters (pytest-xdist workers) take
an entry's lock file in turn and write the entry through a temporary file and a rename, so a
reader never sees half a file. Deleting build/cache/ is always safe.

Files in `out_dir` are rewritten only when their content changes, so simulator build caches stay
valid.
"""

from __future__ import annotations

import fcntl
import functools
import hashlib
import os
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from amaranth.back import rtlil, verilog

from ..support.tools import ToolError, build_root, require

__all__ = ["EmittedRtl", "emit_rtl", "sim_verilog_cache", "write_if_changed"]

#: the Yosys passes that turn RTLIL into the simulation form (why: the module docstring)
SIM_SCRIPT = "proc; opt_clean; write_verilog -noattr"


@dataclass(frozen=True)
class EmittedRtl:
    toplevel: str
    rtlil: Path
    verilog: Path
    sim_verilog: Path


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


def _sim_verilog(rtlil_text: str) -> str:
    """The simulation Verilog of `rtlil_text`: from the cache, else converted and cached."""
    yosys = require("yosys").location
    key = hashlib.sha256("\0".join([_yosys_build(yosys), SIM_SCRIPT, rtlil_text]).encode())
    cache = sim_verilog_cache()
    cache.mkdir(parents=True, exist_ok=True)
    entry = cache / f"{key.hexdigest()}.v"
    # one lock per entry: two workers emitting the same design convert it once; different
    # designs convert at once
    with open(cache / f"{key.hexdigest()}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if entry.is_file():
            return entry.read_text()
        text = _convert_sim_verilog(yosys, rtlil_text)
        _write_atomically(entry, text)
        return text


def emit_rtl(component, toplevel: str, out_dir: Path) -> EmittedRtl:
    """Write the RTLIL, Verilog and simulation Verilog of `component` into `out_dir`."""
    out_dir = Path(out_dir)
    # emit_src=False: source locations carry absolute paths, which would make the files differ
    # between checkouts and defeat caching by content
    rtlil_text = rtlil.convert(component, name=toplevel, emit_src=False)
    files = EmittedRtl(toplevel, out_dir / f"{toplevel}.il", out_dir / f"{toplevel}.v",
                       out_dir / f"{toplevel}_sim.v")
    write_if_changed(files.rtlil, rtlil_text)
    # what verilog.convert(component, name=toplevel, emit_src=False) returns in Amaranth 0.5.10
    # (pinned in pyproject.toml), without elaborating the component a second time;
    # tests/test_emit.py checks that the two agree
    write_if_changed(files.verilog, verilog._convert_rtlil_text(rtlil_text))
    write_if_changed(files.sim_verilog, _sim_verilog(rtlil_text))
    return files
