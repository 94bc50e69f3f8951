"""The mapped gate netlist, read from Yosys's JSON, and the netlist the power run reads.

Yosys writes the final netlist twice: as Verilog for the timing run and as JSON for this module.
The JSON gives every net as a bit number and keeps the RTL names of nets that have one (flip-flop
outputs, ports), which is what the activity evaluation needs.

The power run reads a netlist written here (`power_netlist_verilog`): the same cells and
connections, with every input port entering through a pad (a DFFPOSX1 and a BUFX2 named
`edgexpert_pad*`, excluded from the reported power). OpenSTA 2019 re-propagates switching activity
from the input ports through the logic whenever an activity is set, overwriting the activities the
simulation gave; behind registered pads no logic pin is reachable from a port, so the annotated
activities stand. The BUFX2 also gives the logic the input slew the timing constraints assume.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from ..support.tools import ToolError
from .memories import net_names

__all__ = ["Bit", "NetlistCell", "Netlist", "read_netlist", "data_input_bits", "power_netlist_verilog",
           "PAD_PREFIX"]

#: a net bit as Yosys numbers it, or a constant "0" / "1" / "x" / "z"
Bit = int | str

#: instance-name prefix of the pads the power netlist adds (their power is subtracted)
PAD_PREFIX = "edgexpert_pad"


@dataclass(frozen=True)
class NetlistCell:
    name: str
    type: str
    pins: dict[str, Bit]


@dataclass(frozen=True)
class Netlist:
    top: str
    inputs: dict[str, list[Bit]]
    outputs: dict[str, list[Bit]]
    cells: list[NetlistCell]
    names: dict[int, list[tuple[str, int]]]  # public names of each net bit, (name, bit index)


def data_input_bits(netlist: Netlist, clock: str):
    """(port, index, bit) of every input bit that is a net (not a constant), the clock excluded."""
    for port, bits in netlist.inputs.items():
        if port == clock:
            continue
        for i, bit in enumerate(bits):
            if isinstance(bit, int):
                yield port, i, bit


def read_netlist(json_text: str, top: str) -> Netlist:
    """Module `top` of a Yosys `write_json` netlist of single-bit standard cells."""
    modules = json.loads(json_text)["modules"]
    if top not in modules:
        raise ToolError(f"netlist JSON has no module {top!r} (modules: {', '.join(modules)})")
    module = modules[top]
    inputs, outputs = {}, {}
    for name, port in module["ports"].items():
        if port.get("offset", 0) or port.get("upto", 0):
            raise ToolError(f"port {name} of {top} is not numbered [N-1:0]; the flow needs that")
        (inputs if port["direction"] == "input" else outputs)[name] = port["bits"]
    cells = []
    for name, cell in sorted(module["cells"].items()):
        pins = {}
        for pin, bits in cell["connections"].items():
            if len(bits) != 1:
                raise ToolError(f"cell {name} ({cell['type']}) pin {pin} is {len(bits)} bits wide: "
                                "only single-bit standard cells are expected after mapping")
            pins[pin] = bits[0]
        cells.append(NetlistCell(name, cell["type"], pins))
    return Netlist(top, inputs, outputs, cells, net_names(module["netnames"]))


_PLAIN = re.compile(r"[A-Za-z_][A-Za-z0-9_]*$")


def _ident(name: str) -> str:
    # Verilog escaped identifiers end with a space
    return name if _PLAIN.match(name) else f"\\{name} "


def power_netlist_verilog(netlist: Netlist, clock: str, pad_cell: str = "DFFPOSX1",
                          pad_buffer: str = "BUFX2") -> tuple[str, dict[str, str]]:
    """(Verilog of `netlist` with registered input pads, instance name of each netlist cell)."""
    if clock not in netlist.inputs:
        raise ToolError(f"{netlist.top} has no clock input {clock!r}: the power run needs one")
    net: dict[int, str] = {}
    for port, bits in netlist.outputs.items():
        for i, bit in enumerate(bits):
            if isinstance(bit, int):
                if bit in net:
                    raise ToolError(f"output bits {net[bit]} and {port}[{i}] of {netlist.top} are "
                                    "the same net; synthesis should have buffered them (insbuf)")
                net[bit] = f"{_ident(port)}[{i}]"
    clock_bit = netlist.inputs[clock][0]
    net.setdefault(clock_bit, _ident(clock))

    def ref(bit: Bit) -> str:
        if isinstance(bit, str):
            return "1'b1" if bit == "1" else "1'b0"
        return net.setdefault(bit, f"n{bit}")

    body: list[str] = []
    pad = 0
    for port, i, bit in data_input_bits(netlist, clock):
        body.append(f"  {pad_cell} {PAD_PREFIX}{pad} (.CLK({net[clock_bit]}), "
                    f".D({_ident(port)}[{i}]), .Q(edgexpert_padq{pad}));")
        body.append(f"  {pad_buffer} {PAD_PREFIX}buf{pad} (.A(edgexpert_padq{pad}), "
                    f".Y({ref(bit)}));")
        pad += 1
    instances = {}
    for index, cell in enumerate(netlist.cells):
        instances[cell.name] = f"g{index}"
        pins = ", ".join(f".{pin}({ref(bit)})" for pin, bit in cell.pins.items())
        body.append(f"  {cell.type} g{index} ({pins});")

    ports = list(netlist.inputs) + list(netlist.outputs)
    head = [f"module {_ident(netlist.top)} ({', '.join(_ident(p) for p in ports)});"]
    for direction, group in (("input", netlist.inputs), ("output", netlist.outputs)):
        for port, bits in group.items():
            width = f"[{len(bits) - 1}:0] " if port != clock else ""
            head.append(f"  {direction} {width}{_ident(port)};")
    port_nets = {n for n in net.values() if "[" in n or n == net[clock_bit]}
    wires = sorted({n for n in net.values() if n not in port_nets})
    wires += [f"edgexpert_padq{k}" for k in range(pad)]
    head += [f"  wire {w};" for w in wires]
    return "\n".join(head + body + ["endmodule", ""]), instances
