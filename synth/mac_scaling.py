"""The expert engine's MAC array scaled analytically to EdgeXpert's 8K MACs, against its published
area and power (docs/synthesis.md, "Scaling to EdgeXpert's 8K MACs").

Inputs are the cost table's entries of the engine at two synthesized points, `engine` (the
configured lanes) and `engine_l128` (128 lanes on a 512-bit word, edgexpert/blocks.py), both
at the table's node (`synth.target_node_nm`; EdgeXpert's is 28 nm, so compare at 28) as
`edgexpert synth --all` wrote them. A point's size N is its peak MACs per cycle:
two MAC arrays (GATE_UP, DOWN) of `lanes` products each.

What the fits assume:

- Logic area is linear in N: `fixed + per_mac x N`; two points fix both. The fixed part is what
  does not grow with the lanes (requantization, SwiGLU, quantizer, combine, control), counted
  once at EdgeXpert's size: one expert pipeline feeding all the MACs.
- Logic energy per clock cycle is linear in N, `fixed + per_mac x N`, at the stimulus's
  activity: a lane costs the same per cycle busy or idle (clocked registers, broadcast operands).
  The opposite reading of the same two points, an idle lane free (energy linear in the MACs
  done), is reported beside it (`power_idle_free_w`), or marked refuted where it gives a
  negative fixed part. Without clock gates the first is nearer the truth (every flip-flop is
  clocked every cycle); with them the second (a row is clocked only when it loads).
- The engine's own memories: one whose CACTI area is the same at both points is fixed; one that
  grows with the lanes (the scale blocks, a weight word wide; the accumulators are registers,
  in the logic) is taken at the smaller point's width, banked: per MAC, its area there over
  that point's N. CACTI's cost of one wider word is not linear (the 512-bit scale block is 3.3
  times the area of the 256-bit one), and a real array would bank it.
- SRAM energy, at the smaller point's widths (banked, as for the area): reads per MAC of the
  array per cycle (the scale blocks, most of the reads, read a whole word every cycle, busy or
  not), writes per MAC done, times the MACs busy: EdgeXpert's MAC count times a stated
  utilization.
- The logic's energy at the node is the 180 nm measurement times the energy factor the table records
  (its synthesis report's: Stillmaker & Baas, or synth.scaling.energy; scaling.py); the SRAM's is CACTI's energy per bit times the bits the stimulus
  read and wrote.

The shared SRAM is CACTI's 512 KiB (`sram.*.512KiB`: area and leakage; its accesses are
not modelled). Power is at EdgeXpert's clock.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass

from .costs import CostTable, CostTableError
from .report import format_si

__all__ = ["EDGEXPERT", "SMALL_POINT", "LARGE_POINT", "EnginePoint", "Line", "engine_point",
           "fit_line", "scale_to_edgexpert", "scaling_table"]

#: EdgeXpert's published figures (/work/shared/REFERENCES.md, "EdgeXpert": MICRO 2026, arXiv
#: 2608.05303): 8K MACs in 8 clusters, 800 MHz, 1.52 W without DRAM, 9.3 mm2 of which 3.8 mm2
#: synthesized logic and 3.0 mm2 SRAM, 512 KB shared SRAM; Samsung 28 nm FDSOI, 1.0 V
EDGEXPERT = {"macs": 8192, "clock_hz": 800e6, "power_w": 1.52, "area_m2": 9.3e-6,
             "logic_area_m2": 3.8e-6, "sram_area_m2": 3.0e-6, "sram_kib": 512}
#: the two synthesized points of the engine (edgexpert/blocks.py)
SMALL_POINT, LARGE_POINT = "engine", "engine_l128"
#: CACTI's 512 KiB reference SRAM in the cost table (report.py REFERENCE_SRAM_KIB)
_SRAM_KIND = "512KiB"


@dataclass(frozen=True)
class EnginePoint:
    """One synthesized engine's figures at the cost table's node."""
    block: str
    peak_macs: int                  # MACs per cycle of both arrays at full speed
    macs_per_cycle: float           # what its stimulus did
    logic_area_m2: float
    sram_area_m2: float             # the engine's own memories (CACTI)
    memory_areas_m2: dict           # each memory's CACTI area, by its name in the table
    logic_energy_per_cycle_j: float
    sram_read_energy_per_cycle_j: float
    sram_write_energy_per_mac_j: float
    fmax_hz: float
    clock_gated: bool               # synthesized with `synth.clock_gating`


@dataclass(frozen=True)
class Line:
    """y = fixed + per_mac x MACs."""
    fixed: float
    per_mac: float

    def at(self, macs: float) -> float:
        return self.fixed + self.per_mac * macs


def fit_line(x0: float, y0: float, x1: float, y1: float) -> Line:
    """The line through two points (x: MACs)."""
    if x0 == x1:
        raise CostTableError(f"the two engine points have the same MAC count ({x0:g}): accepted "
                             "two different sizes")
    slope = (y1 - y0) / (x1 - x0)
    return Line(y0 - slope * x0, slope)


def engine_point(table: CostTable, block: str) -> EnginePoint:
    """The figures of engine `block` at `table`'s node; one clear line if it is not there."""
    if f"{block}.area" not in table.costs:
        raise CostTableError(f"the cost table has no {block!r}: run `edgexpert synth --all` (or "
                             f"`--all --blocks {SMALL_POINT},{LARGE_POINT}`, these two only) first")
    need = [f"{block}.{k}" for k in ("area_180nm", "fmax", "energy_per_mac_180nm",
                                     "energy_per_cycle_180nm", "sram_read_energy_per_mac",
                                     "sram_write_energy_per_mac")]
    missing = [k for k in need if k not in table.costs]
    if missing:
        raise CostTableError(f"the cost table lacks {', '.join(missing)} (power not measured, or "
                             f"an older table): run `edgexpert synth --all`")
    lanes = re.search(r"\blanes=(\d+)", table.cost(f"{block}.area_180nm").source)
    if lanes is None:
        raise CostTableError(f"{block}.area_180nm names no lanes= parameter in its source: "
                             "accepted an engine's synthesis run")
    area = table.cost(f"{block}.area").value
    memories = {name[len(block) + 1:-len(".sram_area")]: c.value
                 for name, c in table.costs.items()
                 if name.startswith(f"{block}.") and name.endswith(".sram_area")}
    if "energy" not in table.scaling:
        raise CostTableError("the cost table names no energy scaling factor (an older table): "
                             "run `edgexpert synth --all`")
    factor = table.scaling["energy"]
    per_mac_180 = table.cost(f"{block}.energy_per_mac_180nm").value
    per_cycle_180 = table.cost(f"{block}.energy_per_cycle_180nm").value
    if per_mac_180 <= 0:
        raise CostTableError(f"{block}.energy_per_mac_180nm is 0: accepted a stimulus that does "
                             "MACs")
    macs_per_cycle = per_cycle_180 / per_mac_180
    sram_area = sum(memories.values())
    return EnginePoint(
        block, 2 * int(lanes.group(1)), macs_per_cycle, area - sram_area, sram_area, memories,
        per_cycle_180 * factor,
        table.cost(f"{block}.sram_read_energy_per_mac").value * macs_per_cycle,
        table.cost(f"{block}.sram_write_energy_per_mac").value,
        table.cost(f"{block}.fmax").value,
        "clock gates" in table.cost(f"{block}.area_180nm").source)


def scale_to_edgexpert(table: CostTable, utilization: float = 1.0) -> dict:
    """Both engine points, the fits, and our engine at EdgeXpert's MAC count against its figures.
    `utilization`: the share of the MACs busy each cycle (0 < u <= 1)."""
    if not 0 < utilization <= 1:
        raise CostTableError(f"utilization {utilization!r} is out of range: accepted 0 < u <= 1")
    small, large = engine_point(table, SMALL_POINT), engine_point(table, LARGE_POINT)
    if small.clock_gated != large.clock_gated:
        raise CostTableError(f"{SMALL_POINT} and {LARGE_POINT} differ in clock gating in the cost "
                             "table: accepted two points synthesized alike (`synth --all` with "
                             "one synth.clock_gating)")
    fixed = {name for name, area in small.memory_areas_m2.items()
             if large.memory_areas_m2.get(name) == area}
    fits = {
        "logic_area_m2": fit_line(small.peak_macs, small.logic_area_m2,
                                  large.peak_macs, large.logic_area_m2),
        "engine_sram_area_m2": Line(
            sum(small.memory_areas_m2[name] for name in fixed),
            sum(a for name, a in small.memory_areas_m2.items() if name not in fixed)
            / small.peak_macs),
        "logic_energy_j": fit_line(small.peak_macs, small.logic_energy_per_cycle_j,
                                   large.peak_macs, large.logic_energy_per_cycle_j),
        # the other reading of the same two points: per MAC done, an idle lane free
        "logic_energy_per_mac_done_j": fit_line(small.macs_per_cycle,
                                                small.logic_energy_per_cycle_j,
                                                large.macs_per_cycle,
                                                large.logic_energy_per_cycle_j),
        "sram_read_energy_j": Line(0.0, small.sram_read_energy_per_cycle_j / small.peak_macs),
        "sram_write_energy_j": Line(0.0, small.sram_write_energy_per_mac_j),
    }
    n, clock = EDGEXPERT["macs"], EDGEXPERT["clock_hz"]
    busy = n * utilization
    shared_area = table.cost(f"sram.area.{_SRAM_KIND}").value
    shared_leak = table.cost(f"sram.leakage.{_SRAM_KIND}").value
    logic_area = fits["logic_area_m2"].at(n)
    engine_sram = fits["engine_sram_area_m2"].at(n)
    logic_w = fits["logic_energy_j"].at(n) * clock
    done = fits["logic_energy_per_mac_done_j"]
    # a negative fixed part refutes "an idle lane is free" on these points (no figure then)
    idle_free_w = done.at(busy) * clock if done.fixed >= 0 else None
    sram_w = (fits["sram_read_energy_j"].at(n) + fits["sram_write_energy_j"].at(busy)) * clock
    ours = {
        "logic_area_m2": logic_area, "engine_sram_area_m2": engine_sram,
        "shared_sram_area_m2": shared_area,
        "sram_area_m2": engine_sram + shared_area,
        "area_m2": logic_area + engine_sram + shared_area,
        "logic_power_w": logic_w, "sram_power_w": sram_w + shared_leak,
        "power_w": logic_w + sram_w + shared_leak,
        # the logic and the shared SRAM alone: the engine's own memories left out
        "power_without_engine_sram_w": logic_w + shared_leak,
        "logic_power_idle_free_w": idle_free_w,
        "power_idle_free_w": None if idle_free_w is None else idle_free_w + sram_w + shared_leak,
        "energy_per_mac_j": (logic_w + sram_w + shared_leak) / (busy * clock),
        "fmax_hz": min(small.fmax_hz, large.fmax_hz),
    }
    theirs = {**{k: EDGEXPERT[k] for k in ("logic_area_m2", "sram_area_m2", "area_m2", "power_w")},
              "energy_per_mac_j": EDGEXPERT["power_w"] / (n * clock)}
    return {"points": {p.block: asdict(p) for p in (small, large)},
            "fits": {name: asdict(line) for name, line in fits.items()},
            "fixed_memories": sorted(fixed), "macs": n, "clock_hz": clock,
            "utilization": utilization, "node": table.node, "clock_gated": small.clock_gated,
            "shared_sram_kib": EDGEXPERT["sram_kib"], "ours": ours, "edgexpert": theirs,
            "ratio": {k: ours[k] / theirs[k] for k in ("logic_area_m2", "sram_area_m2",
                                                       "area_m2", "power_w")}}


def scaling_table(result: dict) -> str:
    """The scaling as markdown tables: each engine point, the fits, ours at EdgeXpert's MACs."""
    lines = ["| point | peak MACs/cycle | MACs/cycle (stimulus) | logic mm2 | engine SRAM mm2 "
             f"| logic energy/cycle | SRAM reads/cycle | SRAM writes/MAC | fmax {result['node']} |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for p in result["points"].values():
        lines.append(f"| {p['block']} | {p['peak_macs']} | {p['macs_per_cycle']:.1f} | "
                     f"{p['logic_area_m2'] * 1e6:.4f} | {p['sram_area_m2'] * 1e6:.4f} | "
                     f"{format_si(p['logic_energy_per_cycle_j'], 'J')} | "
                     f"{format_si(p['sram_read_energy_per_cycle_j'], 'J')} | "
                     f"{format_si(p['sram_write_energy_per_mac_j'], 'J')} | "
                     f"{p['fmax_hz'] / 1e6:.0f} MHz |")
    f = result["fits"]
    lines += ["", f"| fit ({result['node']}) | fixed | per MAC of the array |", "|---|---:|---:|",
              f"| logic area | {f['logic_area_m2']['fixed'] * 1e12:,.0f} um2 | "
              f"{f['logic_area_m2']['per_mac'] * 1e12:.1f} um2 |",
              f"| engine memories' area | {f['engine_sram_area_m2']['fixed'] * 1e12:,.0f} um2 | "
              f"{f['engine_sram_area_m2']['per_mac'] * 1e12:.1f} um2 |",
              f"| logic energy per cycle | {format_si(f['logic_energy_j']['fixed'], 'J')} | "
              f"{format_si(f['logic_energy_j']['per_mac'], 'J')} |",
              f"| logic energy per cycle, per MAC done (an idle lane free) | "
              f"{format_si(f['logic_energy_per_mac_done_j']['fixed'], 'J')} | "
              f"{format_si(f['logic_energy_per_mac_done_j']['per_mac'], 'J')} per MAC done |",
              f"| SRAM reads per cycle | | {format_si(f['sram_read_energy_j']['per_mac'], 'J')} |",
              f"| SRAM writes per MAC done | | "
              f"{format_si(f['sram_write_energy_j']['per_mac'], 'J')} |"]
    o, t, r = result["ours"], result["edgexpert"], result["ratio"]
    lines += ["", f"| at {result['macs']:,} MACs, {result['clock_hz'] / 1e6:.0f} MHz, utilization "
              f"{result['utilization']:g} | ours | EdgeXpert | ours / EdgeXpert |",
              "|---|---:|---:|---:|",
              f"| logic area | {o['logic_area_m2'] * 1e6:.2f} mm2 | "
              f"{t['logic_area_m2'] * 1e6:.1f} mm2 | {r['logic_area_m2']:.2f} |",
              f"| SRAM area ({o['engine_sram_area_m2'] * 1e6:.2f} engine memories + "
              f"{o['shared_sram_area_m2'] * 1e6:.2f} shared {result['shared_sram_kib']} KiB) | "
              f"{o['sram_area_m2'] * 1e6:.2f} mm2 | {t['sram_area_m2'] * 1e6:.1f} mm2 | "
              f"{r['sram_area_m2']:.2f} |",
              f"| total area | {o['area_m2'] * 1e6:.2f} mm2 | {t['area_m2'] * 1e6:.1f} mm2 | "
              f"{r['area_m2']:.2f} |",
              f"| power, a lane busy or idle alike ({o['logic_power_w']:.3g} W logic + "
              f"{o['sram_power_w']:.3g} W SRAM) | "
              f"{o['power_w']:.3g} W | {t['power_w']:.2f} W | {r['power_w']:.1f} |",
              (f"| power, an idle lane free ({o['logic_power_idle_free_w']:.3g} W logic) | "
               f"{o['power_idle_free_w']:.3g} W | {t['power_w']:.2f} W | "
               f"{o['power_idle_free_w'] / t['power_w']:.1f} |"
               if o["power_idle_free_w"] is not None else
               "| power, an idle lane free | refuted by the points (a negative fixed part) | | |"),
              f"| power without the engine's memories | {o['power_without_engine_sram_w']:.3g} W "
              f"| {t['power_w']:.2f} W | {o['power_without_engine_sram_w'] / t['power_w']:.2f} |",
              f"| energy per MAC done | {format_si(o['energy_per_mac_j'], 'J')} | "
              f"{format_si(t['energy_per_mac_j'], 'J')} | "
              f"{o['energy_per_mac_j'] / t['energy_per_mac_j']:.1f} |",
              "", f"Our fmax at {result['node']} is {o['fmax_hz'] / 1e6:.0f} MHz (the slower point); power is "
              f"at EdgeXpert's {result['clock_hz'] / 1e6:.0f} MHz (docs/synthesis.md, \"Scaling to "
              "EdgeXpert's 8K MACs\"). Both points were synthesized "
              + ("with clock gates (synth.clock_gating)." if result["clock_gated"] else
                 "without clock gates (synth.clock_gating off).")]
    return "\n".join(lines)
