"""Keeping memories out of the gate netlist.

Generic Yosys turns an Amaranth `Memory` into flip-flops and multiplexers; an accelerator builds
it from an SRAM macro instead, so its cost comes from a CACTI run (`cacti.sram_cost`) and the
gate netlist holds only the logic around it. The method:

1. A first, short Yosys run (`scan`) does what synthesis does first (`proc; flatten;
   memory -nomap -norom`, which folds read registers into synchronous read ports and collects
   every memory into one `$mem_v2` cell) and writes the design as JSON. Each `$mem_v2` is
   recorded: width, depth, ports, which read ports are synchronous, and the nets on its enables
   and read data.
2. The synthesis run repeats those passes, turns each memory into an instance of a black box
   with the memory's port widths (`chtype`), and cuts it out with `expose -evert`: the memory's
   read data become primary inputs of the block, its address, write data and enables primary
   outputs. The rest of the block is synthesized as before.

So the netlist keeps every gate that drives or reads the memory, STA times the paths into and
out of it like paths to and from a register at a port (the SRAM's own clock-to-output and setup
times are not in the critical path), and power counts the logic around it; the memory's own
energy is its bits read and written (from the activity simulation) times CACTI's read and write
energy per bit.

Limits: `memory_bmux2rom` is skipped (`-norom`), so only memories declared in the RTL are cut,
never ROMs Yosys would infer from logic. Constant memory pins (a read enable tied high, resets
tied low) and clocks are not exposed. An asynchronous read port (Amaranth `domain="comb"`) is a
register file rather than an SRAM; it is costed by the same model and flagged.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

__all__ = ["Memory", "has_memories", "scan_script", "parse_scan", "net_names", "stub_verilog",
           "cut_script", "SignalBit"]

#: a net bit by its RTL names (every (name, bit index) Yosys knows it by), or a constant "0" / "1"
SignalBit = list[tuple[str, int]] | str

#: ports of a Yosys $mem_v2 cell that become block ports (clocks and resets never do)
_DATA_PORTS = ("RD_ADDR", "RD_DATA", "RD_EN", "WR_ADDR", "WR_DATA", "WR_EN")


@dataclass(frozen=True)
class Memory:
    """One memory cut out of the netlist, as the SRAM model and the activity count see it."""
    name: str  # the memory's name in the RTL (hierarchical after flattening)
    cell: str  # Yosys cell name of the $mem_v2 after `memory -nomap`
    instance: str  # the black box it becomes; its ports are named <instance>__<PORT>
    width: int
    depth: int
    read_ports: int
    write_ports: int
    sync_read_ports: int
    port_widths: dict[str, int]  # exposed ports only
    read_enables: list[SignalBit]  # one per read port
    write_enables: list[list[SignalBit]]  # per write port, one per data bit
    read_data: list[SignalBit]  # RD_DATA bits in port order (port 0 first, LSB first)

    def to_json(self) -> dict:
        return asdict(self)


def has_memories(rtlil_text: str) -> bool:
    """Whether Amaranth's RTLIL declares any memory (so the scan run is needed at all)."""
    return any(line.lstrip().startswith("memory ") for line in rtlil_text.splitlines())


def scan_script(liberty: Path, rtlil: Path, top: str, out_json: Path) -> str:
    return (f"read_liberty -lib {liberty}\nread_rtlil {rtlil}\nhierarchy -check -top {top}\n"
            f"proc\nflatten\nopt_clean\nmemory -nomap -norom\nwrite_json {out_json}\n")


def _param(cell: dict, name: str) -> int:
    value = cell["parameters"][name]
    # Yosys writes parameters as binary strings; x bits do not occur in the ones read here
    return int(value, 2) if isinstance(value, str) else int(value)


def net_names(netnames: dict) -> dict[int, list[tuple[str, int]]]:
    """Every public name of each net bit in a Yosys JSON module's `netnames`, as the RTL spells
    it (Yosys writes a public name that starts with `$` with its escaping backslash)."""
    names: dict[int, list[tuple[str, int]]] = {}
    for name, net in sorted(netnames.items()):
        if net.get("hide_name"):
            continue
        name = name[1:] if name.startswith("\\") else name
        for index, bit in enumerate(net["bits"]):
            if isinstance(bit, int):
                names.setdefault(bit, []).append((name, index))
    return names


def parse_scan(json_text: str, top: str) -> list[Memory]:
    """The memories of module `top` in the JSON written by `scan_script`."""
    module = json.loads(json_text)["modules"].get(top, {})
    names = net_names(module.get("netnames", {}))

    def signal(bit) -> SignalBit:
        if isinstance(bit, str):
            return "1" if bit == "1" else "0"
        return names.get(bit, [])

    memories = []
    cells = sorted((n, c) for n, c in module.get("cells", {}).items() if c["type"] == "$mem_v2")
    for index, (cell_name, cell) in enumerate(cells):
        conn = cell["connections"]
        width, rd, wr = _param(cell, "WIDTH"), _param(cell, "RD_PORTS"), _param(cell, "WR_PORTS")
        rd_clocked = cell["parameters"]["RD_CLK_ENABLE"]
        rd_clocked = rd_clocked if isinstance(rd_clocked, str) else format(rd_clocked, f"0{rd}b")
        exposed = {port: len(conn[port]) for port in _DATA_PORTS
                   if port in conn and any(isinstance(b, int) for b in conn[port])}
        memories.append(Memory(
            name=cell["parameters"].get("MEMID", cell_name).lstrip("\\"),
            cell=cell_name, instance=f"edgexpert_mem{index}", width=width,
            depth=_param(cell, "SIZE"), read_ports=rd, write_ports=wr,
            sync_read_ports=rd_clocked.count("1"), port_widths=exposed,
            read_enables=[signal(b) for b in conn.get("RD_EN", [])],
            write_enables=[[signal(b) for b in conn["WR_EN"][p * width:(p + 1) * width]]
                           for p in range(wr)],
            read_data=[signal(b) for b in conn.get("RD_DATA", [])]))
    return memories


def stub_verilog(memories: list[Memory]) -> str:
    """Black-box modules with each memory's exposed ports, for `read_verilog -lib`."""
    out = []
    for mem in memories:
        ports = mem.port_widths
        out.append("(* blackbox *)")
        out.append(f"module {mem.instance} ({', '.join(ports)});")
        for port, width in ports.items():
            direction = "output" if port == "RD_DATA" else "input"
            out.append(f"  {direction} [{width - 1}:0] {port};")
        out.append("endmodule")
    return "\n".join(out) + "\n"


def cut_script(memories: list[Memory], top: str, stubs: Path) -> str:
    """Yosys commands, run right after reading the design, that cut every memory out."""
    if not memories:
        return ""
    lines = [f"read_verilog -lib {stubs}", "proc", "flatten", "opt_clean", "memory -nomap -norom",
             f"cd {top}"]
    for mem in memories:
        lines += [f"rename {mem.cell} {mem.instance}",
                  f"chtype -set {mem.instance} {mem.instance}",
                  f"expose -evert -sep __ {mem.instance}"]
    lines.append("cd ..")
    return "\n".join(lines) + "\n"
