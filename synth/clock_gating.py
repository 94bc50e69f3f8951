"""Clock gates for enable flip-flops, inserted into Yosys's generic netlist before cell mapping.

osu018 has no flip-flop with an enable: `dfflibmap` maps an enable flip-flop to a DFFPOSX1 whose
D input a multiplexer holds at Q, so every flip-flop is clocked every cycle, loaded or not.
A commercial flow (Synopsys DC's clock-gating insertion, for one) replaces the multiplexers of
a group of flip-flops that share an enable with one clock gate: the group is clocked only in
the cycles it loads. This does the same, by default (`synth.clock_gating`), on the netlist
`synth -flatten` leaves (Yosys JSON, fine-grained cells), before `dfflibmap`:

- A group is the posedge flip-flops with an enable ($_DFFE_P?_, $_SDFFE_P???_, $_SDFFCE_P???_)
  on the same clock, enable and (for $_SDFFE_, whose reset acts without the enable) reset; one
  of `min_bits` or more gets a gate, a smaller one stays as it is.
- The gate is the standard latch-based one, from osu018 cells: an INVX1 on the clock, a LATCH
  (transparent while its CLK is high, so while the clock is low) holding the enable over the
  high phase, and an AND2X2 of the clock and the latch: the gated clock. The enable has the
  whole cycle to settle (the latch closes at the rising edge), and the gated clock cannot
  glitch. For $_SDFFE_ the gate's enable is enable or reset.
- Each flip-flop of the group becomes the same flip-flop without its enable ($_DFF_P_,
  $_SDFF_P??_) on the gated clock.
- A group of more than `max_bits` flip-flops gets a gate per `max_bits` of them (the last
  fewer; under `min_bits`, left as it is), all on the same enable: a gate drives at most that many clock pins, as a commercial
  flow bounds a gate's fan-out (Synopsys DC's `set_clock_gating_style -max_fanout`). The flow
  builds no clock tree, so one AND2X2 would otherwise drive a whole array's accumulators (24,590
  clock pins in `engine_l16`), and OpenSTA charges each of them the flip-flop's internal power at
  that net's transition time, far outside the liberty's tables: the gated `engine_l16` measured
  2.9 times the ungated one's power so (docs/synthesis.md, "Clock gating").

Nets and cells it adds are named `edgexpert_cg<n>_*` and kept, so the activity evaluation
(synth/activity.py) and the power run find them in the mapped netlist.
"""

from __future__ import annotations

import re

__all__ = ["GATE_CELLS", "gate_clocks"]

#: the osu018 cells of a clock gate, and their pins
GATE_CELLS = {"inverter": ("INVX1", "A", "Y"), "latch": ("LATCH", "CLK", "D", "Q"),
              "and": ("AND2X2", "A", "B", "Y")}
_KEEP = {"keep": "00000000000000000000000000000001"}


def _enable_form(cell_type: str):
    """(gated type, enable level, reset joins the enable) for a gateable type, else None."""
    if m := re.fullmatch(r"\$_DFFE_P([PN])_", cell_type):
        return "$_DFF_P_", m[1] == "P", False
    if m := re.fullmatch(r"\$_SDFF(C?)E_P([PN])([01])([PN])_", cell_type):
        return f"$_SDFF_P{m[2]}{m[3]}_", m[4] == "P", m[1] == ""
    return None


def gate_clocks(netlist: dict, top: str, min_bits: int, max_bits: int) -> dict:
    """Insert clock gates into `netlist` (Yosys JSON, changed in place) for module `top`; returns
    {"gates": n, "gated_flip_flops": n, "ungated_enable_flip_flops": n}."""
    if min_bits < 1:
        raise ValueError(f"clock gating min_bits = {min_bits} is out of range: accepted >= 1")
    if max_bits < min_bits:
        raise ValueError(f"clock gating max_bits = {max_bits} is out of range: accepted >= "
                         f"min_bits ({min_bits})")
    module = netlist["modules"][top]
    cells, names = module["cells"], module["netnames"]
    used = [*(bits for c in cells.values() for bits in c["connections"].values()),
            *(n["bits"] for n in names.values())]
    next_bit = 1 + max((b for bits in used for b in bits if isinstance(b, int)), default=1)

    groups: dict[tuple, list[str]] = {}
    for name, cell in cells.items():
        form = _enable_form(cell["type"])
        if form is None:
            continue
        conn = cell["connections"]
        _, level, with_reset = form
        reset = (tuple(conn["R"]), cell["type"][-4]) if with_reset else None
        groups.setdefault((tuple(conn["C"]), tuple(conn["E"]), level, reset), []).append(name)

    def new_net(label: str) -> int:
        nonlocal next_bit
        bit = next_bit
        next_bit += 1
        names[label] = {"hide_name": 0, "bits": [bit], "attributes": dict(_KEEP)}
        return bit

    def add(label: str, cell_type: str, connections: dict, directions: dict) -> None:
        cells[label] = {"hide_name": 0, "type": cell_type, "parameters": {},
                        "attributes": dict(_KEEP), "port_directions": directions,
                        "connections": {pin: [bit] for pin, bit in connections.items()}}

    chunks = []
    for (clock, enable, level, reset), members in sorted(groups.items(), key=lambda g: g[1][0]):
        chunks += [((clock, enable, level, reset), members[i:i + max_bits])
                   for i in range(0, len(members), max_bits)]
    gates = gated = ungated = 0
    for (clock, enable, level, reset), members in chunks:
        if len(members) < min_bits:
            ungated += len(members)
            continue
        p = f"edgexpert_cg{gates}"
        gates += 1
        gated += len(members)
        en = enable[0]
        if not level:  # an active-low enable
            en = new_net(f"{p}_en_n")
            add(f"{p}_en_not", "$_NOT_", {"A": enable[0], "Y": en}, {"A": "input", "Y": "output"})
        if reset is not None:  # the reset acts without the enable: it must clock the flop too
            (r_bit,), r_level = reset
            if r_level == "N":
                r = new_net(f"{p}_rst_n")
                add(f"{p}_rst_not", "$_NOT_", {"A": r_bit, "Y": r}, {"A": "input", "Y": "output"})
                r_bit = r
            both = new_net(f"{p}_en_or_rst")
            add(f"{p}_en_or", "$_OR_", {"A": en, "B": r_bit, "Y": both},
                {"A": "input", "B": "input", "Y": "output"})
            en = both
        inv, lat, gate = GATE_CELLS["inverter"], GATE_CELLS["latch"], GATE_CELLS["and"]
        clock_n, held, gclk = new_net(f"{p}_clk_n"), new_net(f"{p}_en_held"), new_net(f"{p}_gclk")
        add(f"{p}_inv", inv[0], {inv[1]: clock[0], inv[2]: clock_n},
            {inv[1]: "input", inv[2]: "output"})
        add(f"{p}_latch", lat[0], {lat[1]: clock_n, lat[2]: en, lat[3]: held},
            {lat[1]: "input", lat[2]: "input", lat[3]: "output"})
        add(f"{p}_gate", gate[0], {gate[1]: clock[0], gate[2]: held, gate[3]: gclk},
            {gate[1]: "input", gate[2]: "input", gate[3]: "output"})
        for name in members:
            cell = cells[name]
            cell["type"] = _enable_form(cell["type"])[0]
            conn = cell["connections"]
            del conn["E"]
            cell.get("port_directions", {}).pop("E", None)
            conn["C"] = [gclk]
    return {"gates": gates, "gated_flip_flops": gated, "ungated_enable_flip_flops": ungated}
