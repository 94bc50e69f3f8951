"""Synthesis of one block to the OSU 0.18 um cells (Yosys) and its static timing (OpenSTA).

Flow: Amaranth component -> RTLIL -> Yosys `synth`, `dfflibmap`, `abc` with a buffering script
-> `stat` (cells, area) and a gate netlist -> OpenSTA (worst slack, critical path).

scripts/abc.script is Yosys's liberty-mapping script in its `-constr` form, which buffers and
sizes after mapping (`buffer -p; upsize; dnsize`): the plain form does not buffer high-fanout
nets, and one net cost 1.6 ns here. `&fraig -x` is left out: on an 8-pair lane it took 47 of the
48 s of the run, for 0.1% of area and no timing gain.

Results are cached under build/synth/<top>/<key>/ where the key hashes everything that can change
them: the RTLIL, the rendered scripts, the liberty file and the Yosys and OpenSTA versions. A
repeat with the same inputs reads the cached result without running a tool.
"""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
from dataclasses import asdict, dataclass, field
from importlib import resources
from pathlib import Path
from string import Template

from amaranth.back import rtlil

from ..config import SynthConfig
from ..tools import ToolError, build_root, liberty_path, require

__all__ = ["SynthResult", "synthesize", "parse_stat", "parse_sta_report", "name_registers"]

#: version of the result format and of this flow; bump it to invalidate old cache entries
FLOW_VERSION = 1


@dataclass(frozen=True)
class SynthResult:
    top: str
    cells: int
    area_um2: float
    critical_path_ns: float
    fmax_hz: float
    startpoint: str
    endpoint: str
    clock_period_ns: float
    worst_slack_ns: float
    cell_counts: dict[str, int]
    flip_flops: int
    node: str
    key: str
    tools: dict[str, str]
    cached: bool = field(default=False, compare=False)
    work_dir: str = field(default="", compare=False)

    def to_json(self) -> dict:
        return asdict(self)


def _script(name: str) -> Template:
    return Template(resources.files(__package__).joinpath("scripts", name).read_text())


def parse_stat(stat_json: str, stat_txt: str, top: str) -> tuple[int, float, dict[str, int]]:
    """(cells, area_um2, cells by type) of module `top` from Yosys `stat -json` and the text of
    `stat -liberty` (Yosys 0.23 puts the area only in the text)."""
    # tee writes the log banner before the JSON: the object starts at the first '{'
    data = json.loads(stat_json[stat_json.index("{"):])
    module = data.get("modules", {}).get(f"\\{top}")
    if module is None:
        raise ToolError(f"yosys stat has no module {top!r} "
                        f"(modules: {', '.join(data.get('modules', {}))})")
    area = re.search(rf"Chip area for module '\\{re.escape(top)}': (\S+)", stat_txt)
    if area is None:
        raise ToolError(f"yosys stat reported no chip area for {top!r}: was the liberty given "
                        "to stat -liberty?")
    return int(module["num_cells"]), float(area.group(1)), dict(module["num_cells_by_type"])


def parse_sta_report(text: str) -> tuple[float, str, str]:
    """(worst slack ns, startpoint, endpoint) from the OpenSTA run of scripts/sta.tcl."""
    slack = re.search(r"^edgexpert-worst-slack-ns (\S+)$", text, re.M)
    start = re.search(r"^Startpoint: (\S+)", text, re.M)
    end = re.search(r"^Endpoint: (\S+)", text, re.M)
    if not (slack and start and end):
        raise ToolError("OpenSTA output has no worst slack or critical path: "
                        + (text.strip().splitlines() or ["(empty)"])[-1])
    return float(slack.group(1)), start.group(1), end.group(1)


def name_registers(point: str, netlist: str) -> str:
    """`_2580_` -> `_2580_ (s1_sum[13])`: a flip-flop instance named by the net its Q drives,
    since the netlist's instance names say nothing about the design."""
    match = re.search(rf"^\s*DFF\w* {re.escape(point)} \((?:[^;]*?)\.Q\(\\?([^)]+?)\s*\)", netlist,
                      re.M | re.S)
    return f"{point} ({match.group(1).replace(' ', '')})" if match else point


def _run(cmd: list[str], log: Path, what: str) -> str:
    run = subprocess.run(cmd, capture_output=True, text=True)
    log.write_text(run.stdout + run.stderr)
    if run.returncode:
        tail = "\n".join((run.stdout + run.stderr).strip().splitlines()[-5:])
        raise ToolError(f"{what} failed (exit {run.returncode}); log {log}:\n{tail}")
    return run.stdout


def synthesize(component, top: str, options: SynthConfig = SynthConfig()) -> SynthResult:
    """Synthesize `component` as module `top` and time it; cached by content hash."""
    rtlil_text = rtlil.convert(component, name=top, emit_src=False)
    yosys, sta = require("yosys"), require("opensta")
    liberty = liberty_path()
    require("osu018-liberty")
    # The key is computed over scripts rendered with placeholder paths, so it does not depend on
    # where build/ is.
    values = {"liberty": "LIBERTY", "rtlil": "RTLIL", "top": top, "abc_script": "ABC",
              "stat_json": "STAT_JSON", "stat_txt": "STAT_TXT", "netlist": "NETLIST", "delay_ps": round(options.clock_period_ns * 1000),
              "clock_period_ns": options.clock_period_ns, "output_load_pf": options.output_load_pf}
    digest = hashlib.sha256()
    for part in (str(FLOW_VERSION), rtlil_text, yosys.version, sta.version,
                 hashlib.sha256(liberty.read_bytes()).hexdigest(),
                 *(_script(n).substitute(values) for n in ("synth.ys", "abc.script", "sta.tcl"))):
        digest.update(part.encode())
        digest.update(b"\0")
    key = digest.hexdigest()[:20]

    work = build_root() / "synth" / top / key
    result_file = work / "result.json"
    if result_file.is_file():
        return SynthResult(**{**json.loads(result_file.read_text()), "cached": True,
                              "work_dir": str(work)})

    work.mkdir(parents=True, exist_ok=True)
    files = {"rtlil": work / f"{top}.il", "abc_script": work / "abc.script",
             "stat_json": work / "stat.json", "stat_txt": work / "stat.txt", "netlist": work / f"{top}_netlist.v"}
    files["rtlil"].write_text(rtlil_text)
    values.update({name: str(path) for name, path in files.items()}, liberty=str(liberty))
    files["abc_script"].write_text(_script("abc.script").substitute(values))
    (work / "synth.ys").write_text(_script("synth.ys").substitute(values))
    (work / "sta.tcl").write_text(_script("sta.tcl").substitute(values))

    _run([yosys.location, "-q", "-l", str(work / "yosys.log"), str(work / "synth.ys")],
         work / "yosys.out", "yosys synthesis of " + top)
    cells, area, counts = parse_stat(files["stat_json"].read_text(), files["stat_txt"].read_text(),
                                     top)
    sta_out = _run([sta.location, "-no_splash", "-exit", str(work / "sta.tcl")],
                   work / "sta.log", "OpenSTA timing of " + top)
    slack, startpoint, endpoint = parse_sta_report(sta_out)
    netlist = files["netlist"].read_text()
    startpoint, endpoint = name_registers(startpoint, netlist), name_registers(endpoint, netlist)

    # slack = period - (arrival + setup): the path needs period - slack
    critical = round(options.clock_period_ns - slack, 4)
    result = SynthResult(
        top=top, cells=cells, area_um2=area, critical_path_ns=critical,
        fmax_hz=round(1e9 / critical), startpoint=startpoint, endpoint=endpoint,
        clock_period_ns=options.clock_period_ns, worst_slack_ns=round(slack, 4),
        cell_counts=counts,
        flip_flops=sum(n for cell, n in counts.items() if cell.startswith("DFF")),
        node="osu018 180 nm, 1.8 V (typical liberty corner)", key=key,
        tools={"yosys": yosys.version, "opensta": sta.version, "liberty": str(liberty)},
        work_dir=str(work))
    stored = result.to_json()
    del stored["cached"], stored["work_dir"]
    result_file.write_text(json.dumps(stored, indent=2, sort_keys=True))
    return result
