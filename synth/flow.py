"""Synthesis of one block to the OSU 0.18 um cells (Yosys), its static timing and its power
(OpenSTA).

Flow: Amaranth component -> RTLIL -> (memories cut out, synth/memories.py) -> Yosys `synth`,
(with `synth.clock_gating`: clock gates inserted between two Yosys runs, synth/clock_gating.py)
`dfflibmap`, `abc` with a buffering script -> `stat` (cells, area) and a gate netlist -> OpenSTA
(worst slack, critical path) -> with a stimulus: Amaranth simulation (VCD) -> activity of every net
(synth/activity.py) -> OpenSTA power -> energy per operation.

scripts/abc.script is Yosys's liberty-mapping script in its `-constr` form, which buffers and
sizes after mapping (`buffer -p; upsize; dnsize`): the plain form does not buffer high-fanout
nets, and one net cost 1.6 ns here. scripts/abc.constr is that form's constraint file: ABC takes
the inputs of the logic it maps (flip-flop outputs, cut memories' read data, ports) as ideal
drivers unless it names a driving cell, and then `buffer -p` leaves their fan-out unbuffered (one
flip-flop drove 5,669 loads of the whole engine in 65.9 ns, FLOW_VERSION 2). The driving cell is
BUFX2, whose delay per load (0.87 ns/pF from 0.15 to 0.3 pF, osu018 liberty) matches DFFPOSX1's
Q (0.90 ns/pF from 0.075 to 0.15 pF); the load is the output load STA puts on ports, about one
flip-flop's D pin (8.8 fF). `&fraig -x` is left out: on an 8-pair lane it took 47 of the
48 s of the run, for 0.1% of area and no timing gain.

Results are cached under build/synth/<top>/<key>/ where the key hashes everything that can change
them: the RTLIL, the rendered scripts, the liberty file, the Yosys and OpenSTA versions, and for
power the stimulus (the code of its module and its parameters), its seed and length and the
default activity, and with clock gating on, the gating code and its group bounds (off, the key
has no part of gating). Code means the syntax tree without comments and docstrings
(support/code.py): editing a module's documentation does not re-key a run. A repeat with the
same inputs reads the cached result without running a tool or a simulation.
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

from ..contracts.config import SynthConfig
from ..sim.stimuli.common import Stimulus, simulate
from ..support.code import code_only
from ..support.tools import ToolError, build_root, liberty_path, require
from . import memories as mem
from .activity import activity_tcl, evaluate, read_vcd
from .clock_gating import gate_clocks
from .liberty import read_liberty
from .netlist import PAD_PREFIX, power_netlist_verilog, read_netlist
from .signal_names import trace_names

__all__ = ["SynthResult", "synthesize", "parse_stat", "parse_sta_report", "name_registers",
           "parse_power_report"]

#: version of the result format and of this flow; bump it to invalidate old cache entries
#: (4: trace names matched through the design, enums and FSM states read from the VCD's text)
FLOW_VERSION = 4
#: the cell ABC assumes drives each input of the logic it maps (a flip-flop's Q, module doc)
ABC_DRIVING_CELL = "BUFX2"
#: the clock port every block has (Amaranth's default domain)
CLOCK = "clk"


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
    memories: list[dict] = field(default_factory=list)
    power: dict | None = None
    #: with `synth.clock_gating`: gates, gated flip-flops, enable flip-flops left ungated
    clock_gating: dict | None = None
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


#: with clock gates, the paths sta.tcl reports beside each group's worst: a gate's latch borrows
#: time (open while the clock is low), so a path into it has slack 0 whenever the enable is
#: due before the gate's AND checks it, and would hide every flip-flop path behind it
GATED_STA_REPORTS = ("report_checks -path_delay max -digits 4 -to "
                     "[all_registers -edge_triggered -data_pins]\n"
                     "report_checks -path_delay max -digits 4 -to [all_outputs]\n")


def parse_sta_report(text: str) -> tuple[float, str, str]:
    """(worst slack ns, startpoint, endpoint) from the OpenSTA run of scripts/sta.tcl. OpenSTA
    reports the worst path of each path group (with clock gates, `clock_gating_default` comes
    before `clk`, and the worst paths into flip-flops and outputs follow): the critical path is
    the one whose slack is the worst. A path into a clock gate's latch that borrows time has
    slack 0 by construction; the enable's real check is the gate's own (`clock_gating_default`),
    so such a path is not the critical one while it borrows within the latch's window."""
    slack = re.search(r"^edgexpert-worst-slack-ns (\S+)$", text, re.M)
    paths, borrowed = [], False
    for block in re.split(r"^(?=Startpoint: )", text, flags=re.M)[1:]:
        start = re.search(r"^Startpoint: (\S+)", block, re.M)
        end = re.search(r"^Endpoint: (\S+)", block, re.M)
        path_slack = re.search(r"^\s*(-?[0-9.]+)\s+slack", block, re.M)
        if not (start and end):
            continue
        value = float(path_slack.group(1)) if path_slack else float("inf")
        if "time borrowed from endpoint" in block and value >= 0:
            borrowed = True
            continue
        paths.append((value, start.group(1), end.group(1)))
    if not (slack and paths):
        raise ToolError("OpenSTA output has no worst slack or critical path: "
                        + (text.strip().splitlines() or ["(empty)"])[-1])
    worst, start, end = min(paths, key=lambda p: p[0])  # the first of equal slacks
    return (worst if borrowed else float(slack.group(1))), start, end


def name_registers(point: str, netlist: str) -> str:
    """`_2580_` -> `_2580_ (s1_sum[13])`: a flip-flop instance named by the net its Q drives,
    since the netlist's instance names say nothing about the design."""
    match = re.search(rf"^\s*DFF\w* {re.escape(point)} \((?:[^;]*?)\.Q\(\\?([^)]+?)\s*\)", netlist,
                      re.M | re.S)
    return f"{point} ({match.group(1).replace(' ', '')})" if match else point


def parse_power_report(text: str) -> dict[str, float]:
    """Logic power in W (internal, switching, leakage) from the OpenSTA run of scripts/power.tcl:
    the design's total minus the input pads'."""
    design = re.search(r"^edgexpert-power-design (.+)$", text, re.M)
    pads = re.search(r"^edgexpert-power-pads (.+)$", text, re.M)
    instances = re.search(r"^edgexpert-instances (\d+)$", text, re.M)
    if not (design and pads and instances):
        raise ToolError("OpenSTA output has no power figures: "
                        + (text.strip().splitlines() or ["(empty)"])[-1])
    total = [float(x) for x in design.group(1).split()[:4]]
    pad = [float(x) for x in pads.group(1).split()[:4]]
    internal, switching, leakage = (total[i] - pad[i] for i in range(3))
    return {"internal_w": internal, "switching_w": switching, "leakage_w": leakage,
            "dynamic_w": internal + switching, "total_w": internal + switching + leakage,
            "instances": int(instances.group(1))}


def _run(cmd: list[str], log: Path, what: str) -> str:
    run = subprocess.run(cmd, capture_output=True, text=True)
    log.write_text(run.stdout + run.stderr)
    if run.returncode:
        tail = "\n".join((run.stdout + run.stderr).strip().splitlines()[-5:])
        raise ToolError(f"{what} failed (exit {run.returncode}); log {log}:\n{tail}")
    return run.stdout


def synthesize(component, top: str, options: SynthConfig = SynthConfig(),
               stimulus: Stimulus | None = None) -> SynthResult:
    """Synthesize `component` as module `top`, time it, and with a `stimulus` measure its power;
    cached by content hash."""
    rtlil_text = rtlil.convert(component, name=top, emit_src=False)
    yosys, sta = require("yosys"), require("opensta")
    liberty = liberty_path()
    require("osu018-liberty")
    # The key is computed over scripts rendered with placeholder paths, so it does not depend on
    # where build/ is.
    values = {"liberty": "LIBERTY", "rtlil": "RTLIL", "top": top, "abc_script": "ABC",
              "stat_json": "STAT_JSON", "stat_txt": "STAT_TXT", "netlist": "NETLIST",
              "netlist_json": "NETLIST_JSON", "memory_cut": "MEMORY_CUT",
              "power_netlist": "POWER_NETLIST", "activity_tcl": "ACTIVITY_TCL",
              "pad_prefix": PAD_PREFIX, "delay_ps": round(options.clock_period_ns * 1000),
              "clock_period_ns": options.clock_period_ns, "output_load_pf": options.output_load_pf,
              "abc_constr": "ABC_CONSTR", "abc_driving_cell": ABC_DRIVING_CELL,
              "abc_load_ff": options.output_load_pf * 1000,
              "gated_reports": GATED_STA_REPORTS if options.clock_gating else ""}
    scripts = ["synth.ys", "abc.script", "abc.constr", "sta.tcl"] + (["power.tcl"] if stimulus else [])
    power_inputs = ([stimulus.fingerprint(), options.activity_cycles, options.activity_seed,
                     options.default_activity] if stimulus else ["no power"])
    # clock gating adds to the key only when on: an ungated run's key has no part of its code
    gating = ([code_only(resources.files(__package__).joinpath("clock_gating.py").read_text()),
               options.clock_gating_min_bits, options.clock_gating_max_bits]
              if options.clock_gating else [])
    digest = hashlib.sha256()
    for part in (str(FLOW_VERSION), rtlil_text, yosys.version, sta.version,
                 hashlib.sha256(liberty.read_bytes()).hexdigest(),
                 *(_script(n).substitute(values) for n in scripts), *map(str, power_inputs),
                 *map(str, gating)):
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
             "abc_constr": work / "abc.constr",
             "stat_json": work / "stat.json", "stat_txt": work / "stat.txt",
             "netlist": work / f"{top}_netlist.v", "netlist_json": work / f"{top}_netlist.json"}
    files["rtlil"].write_text(rtlil_text)
    memories = _cut_memories(rtlil_text, top, work, files["rtlil"], liberty, yosys.location)
    values.update({name: str(path) for name, path in files.items()}, liberty=str(liberty),
                  memory_cut=mem.cut_script(memories, top, work / "memory_stubs.v"))
    files["abc_script"].write_text(_script("abc.script").substitute(values))
    files["abc_constr"].write_text(_script("abc.constr").substitute(values))
    (work / "synth.ys").write_text(_script("synth.ys").substitute(values))
    (work / "sta.tcl").write_text(_script("sta.tcl").substitute(values))

    gates = None
    if options.clock_gating:
        gates = _synthesize_gated(work, top, yosys.location, options.clock_gating_min_bits,
                                  options.clock_gating_max_bits)
    else:
        _run([yosys.location, "-q", "-l", str(work / "yosys.log"), str(work / "synth.ys")],
             work / "yosys.out", "yosys synthesis of " + top)
    cells, area, counts = parse_stat(files["stat_json"].read_text(), files["stat_txt"].read_text(),
                                     top)
    sta_out = _run([sta.location, "-no_splash", "-exit", str(work / "sta.tcl")],
                   work / "sta.log", "OpenSTA timing of " + top)
    slack, startpoint, endpoint = parse_sta_report(sta_out)
    netlist = files["netlist"].read_text()
    startpoint, endpoint = name_registers(startpoint, netlist), name_registers(endpoint, netlist)
    power = None
    if stimulus is not None:
        power = _power(component, top, options, stimulus, memories, work, files["netlist_json"],
                       liberty, values, sta.location, cells)

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
        memories=[m.to_json() for m in memories], power=power, clock_gating=gates,
        work_dir=str(work))
    stored = result.to_json()
    del stored["cached"], stored["work_dir"]
    result_file.write_text(json.dumps(stored, indent=2, sort_keys=True))
    return result


def _synthesize_gated(work: Path, top: str, yosys: str, min_bits: int, max_bits: int) -> dict:
    """synth.ys in two Yosys runs with the clock gates inserted between them: up to the generic
    netlist of `synth -flatten` (written as JSON), then from `dfflibmap` on, on the gated one."""
    script = (work / "synth.ys").read_text()
    head, mapping = re.split(r"^(?=dfflibmap )", script, maxsplit=1, flags=re.M)
    generic, gated = work / f"{top}_generic.json", work / f"{top}_gated.json"
    (work / "synth_generic.ys").write_text(f"{head}write_json {generic}\n")
    # the JSON holds the liberty's cells as black boxes (the first run read them), the gates' too
    (work / "synth_gated.ys").write_text(f"read_json {gated}\nhierarchy -top {top}\n{mapping}")
    _run([yosys, "-q", "-l", str(work / "yosys_generic.log"), str(work / "synth_generic.ys")],
         work / "yosys_generic.out", "yosys synthesis (generic) of " + top)
    netlist = json.loads(generic.read_text())
    stats = gate_clocks(netlist, top, min_bits, max_bits)
    gated.write_text(json.dumps(netlist))
    _run([yosys, "-q", "-l", str(work / "yosys.log"), str(work / "synth_gated.ys")],
         work / "yosys.out", "yosys mapping of the clock-gated " + top)
    # the two generic netlists are hundreds of MB for the engine; the mapped one stays
    generic.unlink()
    gated.unlink()
    return stats


def _cut_memories(rtlil_text: str, top: str, work: Path, rtlil_file: Path, liberty: Path,
                  yosys: str) -> list[mem.Memory]:
    """Find the design's memories (a short Yosys run) and write the black boxes that replace
    them; no run when the RTLIL declares none."""
    if not mem.has_memories(rtlil_text):
        return []
    scan = work / "memory_scan.json"
    (work / "memory_scan.ys").write_text(mem.scan_script(liberty, rtlil_file, top, scan))
    _run([yosys, "-q", "-l", str(work / "memory_scan.log"), str(work / "memory_scan.ys")],
         work / "memory_scan.out", "yosys memory scan of " + top)
    memories = mem.parse_scan(scan.read_text(), top)
    (work / "memory_stubs.v").write_text(mem.stub_verilog(memories))
    return memories


def _memory_accesses(memories: list[mem.Memory], netlist, evaluation) -> list[dict]:
    """Bits each memory read and wrote in the stimulus: its enables are outputs of the netlist
    (or constants), so their values come from the activity evaluation."""
    cycles = evaluation.cycles

    def high(port: str, index: int, constant) -> tuple[int, bool]:
        bits = netlist.outputs.get(port)
        bit = bits[index] if bits is not None else constant  # not exposed: a constant
        if isinstance(bit, str):
            return (cycles if bit == "1" else 0), True
        if bit in evaluation.high_cycles:
            return evaluation.high_cycles[bit], True
        return cycles, False  # not computable: every cycle, an upper bound

    out = []
    for m in memories:
        reads = [high(f"{m.instance}__RD_EN", i, s) for i, s in enumerate(m.read_enables)]
        writes = [high(f"{m.instance}__WR_EN", i, s)
                  for i, s in enumerate(s for port in m.write_enables for s in port)]
        out.append({"name": m.name, "read_bits": sum(n for n, _ in reads) * m.width,
                    "write_bits": sum(n for n, _ in writes),
                    "enables_evaluated": all(ok for _, ok in reads + writes)})
    return out


def _power(component, top: str, options: SynthConfig, stimulus: Stimulus,
           memories: list[mem.Memory], work: Path, netlist_json: Path, liberty: Path,
           values: dict, sta: str, cells: int) -> dict:
    """Simulate the stimulus, annotate every net's activity, and run OpenSTA power."""
    period_s = options.clock_period_ns * 1e-9
    vcd = work / "activity.vcd"
    operations = simulate(component, stimulus, options.activity_cycles, options.activity_seed,
                          period_s, vcd)
    if operations <= 0:
        raise ToolError(f"the stimulus of {top} performed no {stimulus.operation} in "
                        f"{options.activity_cycles} cycles: energy per operation is undefined")
    names = trace_names(component, top)
    trace = read_vcd(vcd, CLOCK, names.texts)
    if trace.cycles != options.activity_cycles:
        raise ToolError(f"the stimulus of {top} ran {trace.cycles} cycles, not the "
                        f"{options.activity_cycles} asked for")
    netlist = read_netlist(netlist_json.read_text(), top)
    aliases = {f"{m.instance}__RD_DATA": m.read_data for m in memories}
    evaluation = evaluate(netlist, read_liberty(liberty), trace, aliases, CLOCK,
                          trace_names=names.of_net)
    verilog, instances = power_netlist_verilog(netlist, CLOCK)
    (work / f"{top}_power.v").write_text(verilog)
    (work / "activity.tcl").write_text(
        activity_tcl(netlist, instances, evaluation, options.default_activity,
                     options.clock_period_ns))
    values = {**values, "power_netlist": str(work / f"{top}_power.v"),
              "activity_tcl": str(work / "activity.tcl")}
    (work / "power.tcl").write_text(_script("power.tcl").substitute(values))
    report = parse_power_report(_run([sta, "-no_splash", "-exit", str(work / "power.tcl")],
                                     work / "power.log", "OpenSTA power of " + top))
    pads = sum(isinstance(b, int) for port, bits in netlist.inputs.items() if port != CLOCK
               for b in bits)
    if report.pop("instances") != cells + 2 * pads:
        raise ToolError(f"the power netlist of {top} does not hold the synthesized cells plus "
                        f"{2 * pads} pad cells; see {work / 'power.log'}")
    energy = report["total_w"] * period_s * trace.cycles / operations
    return {**report, "clock_hz": 1 / period_s, "cycles": trace.cycles,
            "seed": options.activity_seed, "operation": stimulus.operation,
            "operations": operations, "operations_per_cycle": operations / trace.cycles,
            "energy_per_op_j": energy,
            "dynamic_energy_per_op_j": report["dynamic_w"] * period_s * trace.cycles / operations,
            "stimulus": {"drive": stimulus.drive.__qualname__, "params": dict(stimulus.params),
                         "fingerprint": stimulus.fingerprint()},
            "activity": evaluation.stats,
            "memory_accesses": _memory_accesses(memories, netlist, evaluation)}
