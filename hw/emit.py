"""Turn an Amaranth component into the three files the flows read.

- `<name>.il`     RTLIL: what synthesis reads (smaller netlists than going through Verilog).
- `<name>.v`      Amaranth's own Verilog (built-in Yosys 0.50), for other tools.
- `<name>_sim.v`  the simulation form. Under cocotb's `iverilog -g2012`, the declaration
                  initialisers of Amaranth's Verilog give no time-0 event, so `always @*` outputs
                  stay X (amaranth-lang/amaranth#1629). Re-emitting the RTLIL through Yosys
                  `proc; opt_clean; write_verilog -noattr` gives Verilog that Icarus and
                  Verilator both evaluate from time 0.

Files are rewritten only when their content changes, so simulator build caches stay valid.
"""

from __future__ import annotations

import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from amaranth.back import rtlil, verilog

from ..support.tools import ToolError, require

__all__ = ["EmittedRtl", "emit_rtl", "write_if_changed"]


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


def _sim_verilog(rtlil_text: str) -> str:
    yosys = require("yosys").location
    with tempfile.TemporaryDirectory() as tmp:
        il, out = Path(tmp) / "top.il", Path(tmp) / "top_sim.v"
        il.write_text(rtlil_text)
        run = subprocess.run(
            [yosys, "-q", "-p", f"read_rtlil {il}; proc; opt_clean; write_verilog -noattr {out}"],
            capture_output=True, text=True)
        if run.returncode:
            raise ToolError(f"yosys could not convert RTLIL to simulation Verilog:\n{run.stderr}")
        # the first line names the Yosys build; dropping it keeps the file identical across hosts
        return "".join(out.read_text().splitlines(keepends=True)[1:])


def emit_rtl(component, toplevel: str, out_dir: Path) -> EmittedRtl:
    """Write the RTLIL, Verilog and simulation Verilog of `component` into `out_dir`."""
    out_dir = Path(out_dir)
    # emit_src=False: source locations carry absolute paths, which would make the files differ
    # between checkouts and defeat caching by content
    rtlil_text = rtlil.convert(component, name=toplevel, emit_src=False)
    files = EmittedRtl(toplevel, out_dir / f"{toplevel}.il", out_dir / f"{toplevel}.v",
                       out_dir / f"{toplevel}_sim.v")
    write_if_changed(files.rtlil, rtlil_text)
    write_if_changed(files.verilog, verilog.convert(component, name=toplevel, emit_src=False))
    write_if_changed(files.sim_verilog, _sim_verilog(rtlil_text))
    return files
