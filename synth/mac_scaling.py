"""The expert engine's MAC array scaled analytically to EdgeXpert's 8K MACs, against its published
area and power (docs/synthesis.md, "Scaling to EdgeXpert's 8K MACs").

Inputs are the cost table's entries of the engine's synthesized sizes (`POINTS`,
edgexpert/blocks.py: 16, 32, 64 and 128 lanes, each on the word its int4 weights fill), at the
table's node (`synth.target_node_nm`; EdgeXpert's is 28 nm, so compare at 28) as `edgexpert
synth --all` wrote them; every point the table holds is used, two at least. A point's size N is
its peak MACs per cycle: two MAC arrays (GATE_UP, DOWN) of `lanes` products for each of the
`candidates` multiplied at once.

The fits: ordinary least squares of y = fixed + per_mac x N over the n points, with the textbook
standard errors of a straight line (residual variance s2 = sum of squared residuals / (n - 2);
error of the slope sqrt(s2 / Sxx), of the fitted line at x sqrt(s2 (1/n + (x - mean)^2 / Sxx)),
Sxx the sum of (N - mean)^2). With two points the line passes through both and has no error
estimate (none is reported). The error at EdgeXpert's 8K is the fitted line's at N = 8192: an
extrapolation, so it assumes the line holds that far; it is the only error propagated (the SRAM
terms are CACTI's figures times counted bits, taken at one point, below).

What the fits assume:

- Logic area is linear in N. The fixed part is what does not grow with the lanes
  (requantization, SwiGLU, quantizer, combine, control), counted once at EdgeXpert's size: one
  expert pipeline feeding all the MACs.
- Logic energy per clock cycle is linear in N at the stimulus's activity: a lane costs the same
  per cycle busy or idle (clocked registers, broadcast operands). The other reading, an idle lane
  free (energy linear in the MACs done, `power_idle_free_w`), is fitted too. The points support
  one reading when its residuals' rms is at most half the other's (`DECIDES`); nearer, both
  stand and both are reported; a negative fixed part refutes the second.
- The engine's own memories: one whose CACTI area is the same at every point is fixed; one that
  grows with the lanes (the scale blocks, a weight word wide; the accumulators are registers, in
  the logic) is taken at the smallest point's width, banked: per MAC, its area there over that
  point's N. CACTI's cost of one wider word is not linear, and a real array would bank it.
- SRAM energy, at the smallest point's widths (banked, as for the area): reads per MAC of the
  array per cycle (the scale blocks read a whole word every cycle, busy or not), writes per MAC
  done, times the MACs busy: EdgeXpert's MAC count times a stated utilization.
- The logic's energy at the node is the 180 nm measurement times the energy factor the table
  records (its synthesis report's: Stillmaker & Baas, or synth.scaling.energy; scaling.py); the
  SRAM's is CACTI's energy per bit times the bits the stimulus read and wrote.

The shared SRAM is CACTI's 512 KiB (`sram.*.512KiB`: area and leakage; its accesses are
not modelled). Power is at EdgeXpert's clock.
"""

from __future__ import annotations

import math
import re
from dataclasses import asdict, dataclass

from .costs import CostTable, CostTableError
from .report import format_si

__all__ = ["EDGEXPERT", "POINTS", "EnginePoint", "Fit", "engine_point", "fit_line",
           "scale_to_edgexpert", "scaling_table"]

#: EdgeXpert's published figures (/work/shared/REFERENCES.md, "EdgeXpert": MICRO 2026, arXiv
#: 2608.05303): 8K MACs in 8 clusters, 800 MHz, 1.52 W without DRAM, 9.3 mm2 of which 3.8 mm2
#: synthesized logic and 3.0 mm2 SRAM, 512 KB shared SRAM; Samsung 28 nm FDSOI, 1.0 V
EDGEXPERT = {"macs": 8192, "clock_hz": 800e6, "power_w": 1.52, "area_m2": 9.3e-6,
             "logic_area_m2": 3.8e-6, "sram_area_m2": 3.0e-6, "sram_kib": 512}
#: the engine's synthesized sizes, smallest first (edgexpert/blocks.py)
POINTS = ("engine_l16", "engine_l32", "engine", "engine_l128")
#: one reading of the logic energy is the one the points support when its residuals' rms is at
#: most this share of the other's; nearer, the residuals do not decide between them
DECIDES = 0.5
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
    energy_per_mac_j: float         # logic and SRAM at the node, per MAC the stimulus did
    fmax_hz: float
    clock_gated: bool               # synthesized with `synth.clock_gating`


@dataclass(frozen=True)
class Fit:
    """y = fixed + per_mac x x, least squares over `points` points (module doc); the errors are
    standard errors, None with two points."""
    fixed: float
    per_mac: float
    per_mac_error: float | None
    points: int
    residuals: tuple                # y - fitted y at each point, in the points' order
    x_mean: float
    x_spread: float                 # Sxx: the sum of (x - mean)^2
    variance: float | None          # s2: the residuals' squares over n - 2

    def at(self, x: float) -> float:
        return self.fixed + self.per_mac * x

    def error_at(self, x: float) -> float | None:
        """The fitted line's standard error at `x`."""
        if self.variance is None:
            return None
        return math.sqrt(self.variance * (1 / self.points
                                          + (x - self.x_mean) ** 2 / self.x_spread))

    def relative_rms(self, ys) -> float | None:
        """The residuals' root mean square over the mean of `ys` (the fitted values' size)."""
        if self.variance is None:
            return None
        return math.sqrt(sum(r * r for r in self.residuals) / self.points) / (sum(ys) / len(ys))


def fit_line(xs, ys) -> Fit:
    """The least-squares line through points (xs: MACs) with its errors (module doc)."""
    n = len(xs)
    if n < 2 or n != len(ys):
        raise CostTableError(f"a line needs two points at least: accepted {n}")
    mean_x, mean_y = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mean_x) ** 2 for x in xs)
    if sxx == 0:
        raise CostTableError(f"the engine points have the same MAC count ({xs[0]:g}): accepted "
                             "two different sizes at least")
    slope = sum((x - mean_x) * (y - mean_y) for x, y in zip(xs, ys)) / sxx
    fixed = mean_y - slope * mean_x
    residuals = tuple(y - (fixed + slope * x) for x, y in zip(xs, ys))
    variance = sum(r * r for r in residuals) / (n - 2) if n > 2 else None
    return Fit(fixed, slope, None if variance is None else math.sqrt(variance / sxx), n,
               residuals, mean_x, sxx, variance)


def _parameter(table: CostTable, block: str, name: str) -> int:
    found = re.search(rf"\b{name}=(\d+)", table.cost(f"{block}.area_180nm").source)
    if found is None:
        raise CostTableError(f"{block}.area_180nm names no {name}= parameter in its source: "
                             "accepted an engine's synthesis run")
    return int(found.group(1))


def engine_point(table: CostTable, block: str) -> EnginePoint:
    """The figures of engine `block` at `table`'s node; one clear line if they are incomplete."""
    need = [f"{block}.{k}" for k in ("area", "area_180nm", "fmax", "energy_per_mac",
                                     "energy_per_mac_180nm", "energy_per_cycle_180nm",
                                     "sram_read_energy_per_mac", "sram_write_energy_per_mac")]
    missing = [k for k in need if k not in table.costs]
    if missing:
        raise CostTableError(f"the cost table lacks {', '.join(missing)} (power not measured, or "
                             f"an older table): run `edgexpert synth --all --blocks {block}`")
    area = table.cost(f"{block}.area").value
    memories = {name[len(block) + 1:-len(".sram_area")]: c.value
                for name, c in table.costs.items()
                if name.startswith(f"{block}.") and name.endswith(".sram_area")}
    if "energy" not in table.scaling:
        raise CostTableError("the cost table names no energy scaling factor (an older table): "
                             "run `edgexpert synth --all`")
    per_mac_180 = table.cost(f"{block}.energy_per_mac_180nm").value
    per_cycle_180 = table.cost(f"{block}.energy_per_cycle_180nm").value
    if per_mac_180 <= 0:
        raise CostTableError(f"{block}.energy_per_mac_180nm is 0: accepted a stimulus that does "
                             "MACs")
    macs_per_cycle = per_cycle_180 / per_mac_180
    sram_area = sum(memories.values())
    return EnginePoint(
        block, 2 * _parameter(table, block, "lanes") * _parameter(table, block, "candidates"),
        macs_per_cycle, area - sram_area, sram_area, memories,
        per_cycle_180 * table.scaling["energy"],
        table.cost(f"{block}.sram_read_energy_per_mac").value * macs_per_cycle,
        table.cost(f"{block}.sram_write_energy_per_mac").value,
        table.cost(f"{block}.energy_per_mac").value,
        table.cost(f"{block}.fmax").value,
        "clock gates" in table.cost(f"{block}.area_180nm").source)


def _points(table: CostTable) -> list[EnginePoint]:
    """The engine points the table holds, smallest first: two at least, synthesized alike."""
    held = [name for name in POINTS if f"{name}.area" in table.costs]
    if len(held) < 2:
        absent = [name for name in POINTS if name not in held]
        raise CostTableError(
            f"the cost table holds {len(held)} of the engine's points "
            f"({', '.join(held) or 'none'}); a fit needs two at least, missing "
            f"{', '.join(absent)}: run `edgexpert synth --all --blocks "
            f"{','.join(POINTS[:3])}` (engine_l128 takes hours)")
    points = sorted((engine_point(table, name) for name in held), key=lambda p: p.peak_macs)
    if len({p.clock_gated for p in points}) > 1:
        gated = [p.block for p in points if p.clock_gated]
        raise CostTableError(f"the engine points differ in clock gating in the cost table "
                             f"({', '.join(gated)} gated, the others not): accepted points "
                             "synthesized alike (`synth --all` with one synth.clock_gating)")
    return points


def scale_to_edgexpert(table: CostTable, utilization: float = 1.0) -> dict:
    """The engine points, the fits, and our engine at EdgeXpert's MAC count against its figures.
    `utilization`: the share of the MACs busy each cycle (0 < u <= 1)."""
    if not 0 < utilization <= 1:
        raise CostTableError(f"utilization {utilization!r} is out of range: accepted 0 < u <= 1")
    points = _points(table)
    small = points[0]
    fixed = {name for name, area in small.memory_areas_m2.items()
             if all(p.memory_areas_m2.get(name) == area for p in points)}
    peak = [p.peak_macs for p in points]
    energy = [p.logic_energy_per_cycle_j for p in points]
    fits = {
        "logic_area_m2": fit_line(peak, [p.logic_area_m2 for p in points]),
        "logic_energy_j": fit_line(peak, energy),
        # the other reading of the same points: per MAC done, an idle lane free
        "logic_energy_per_mac_done_j": fit_line([p.macs_per_cycle for p in points], energy),
    }
    n, clock = EDGEXPERT["macs"], EDGEXPERT["clock_hz"]
    busy = n * utilization
    engine_sram = (sum(small.memory_areas_m2[name] for name in fixed)
                   + sum(a for name, a in small.memory_areas_m2.items() if name not in fixed)
                   / small.peak_macs * n)
    shared_area = table.cost(f"sram.area.{_SRAM_KIND}").value
    shared_leak = table.cost(f"sram.leakage.{_SRAM_KIND}").value
    logic_area = fits["logic_area_m2"].at(n)
    logic = fits["logic_energy_j"]
    logic_w = logic.at(n) * clock
    logic_error = logic.error_at(n)
    done = fits["logic_energy_per_mac_done_j"]
    # a negative fixed part refutes "an idle lane is free" on these points (no figure then)
    idle_free_w = done.at(busy) * clock if done.fixed >= 0 else None
    idle_free_error = done.error_at(busy) if idle_free_w is not None else None
    sram_w = (small.sram_read_energy_per_cycle_j / small.peak_macs * n
              + small.sram_write_energy_per_mac_j * busy) * clock
    per_mac_done = busy * clock
    ours = {
        "logic_area_m2": logic_area,
        "logic_area_error_m2": fits["logic_area_m2"].error_at(n),
        "engine_sram_area_m2": engine_sram, "shared_sram_area_m2": shared_area,
        "sram_area_m2": engine_sram + shared_area,
        "area_m2": logic_area + engine_sram + shared_area,
        "logic_power_w": logic_w, "sram_power_w": sram_w + shared_leak,
        "power_w": logic_w + sram_w + shared_leak,
        "power_error_w": None if logic_error is None else logic_error * clock,
        # the logic and the shared SRAM alone: the engine's own memories left out
        "power_without_engine_sram_w": logic_w + shared_leak,
        "logic_power_idle_free_w": idle_free_w,
        "power_idle_free_w": None if idle_free_w is None else idle_free_w + sram_w + shared_leak,
        "energy_per_mac_idle_free_j": None if idle_free_w is None
        else (idle_free_w + sram_w + shared_leak) / per_mac_done,
        "energy_per_mac_idle_free_error_j": None if idle_free_error is None
        else idle_free_error * clock / per_mac_done,
        "energy_per_mac_j": (logic_w + sram_w + shared_leak) / per_mac_done,
        "energy_per_mac_error_j": None if logic_error is None
        else logic_error * clock / per_mac_done,
        "fmax_hz": min(p.fmax_hz for p in points),
    }
    theirs = {**{k: EDGEXPERT[k] for k in ("logic_area_m2", "sram_area_m2", "area_m2", "power_w")},
              "energy_per_mac_j": EDGEXPERT["power_w"] / (n * clock)}
    # which reading of the logic energy the points support: the clearly smaller residuals
    residual = {"busy_or_idle_alike": logic.relative_rms(energy),
                "idle_lane_free": done.relative_rms(energy) if idle_free_w is not None else None}
    supported = None
    if None not in residual.values():
        alike, free = residual["busy_or_idle_alike"], residual["idle_lane_free"]
        supported = ("busy_or_idle_alike" if alike <= DECIDES * free else
                     "idle_lane_free" if free <= DECIDES * alike else "both")
    return {"points": {p.block: asdict(p) for p in points},
            "fits": {name: asdict(line) for name, line in fits.items()},
            "readings_relative_rms": residual, "reading_supported": supported,
            "fixed_memories": sorted(fixed), "macs": n, "clock_hz": clock,
            "utilization": utilization, "node": table.node, "clock_gated": small.clock_gated,
            "shared_sram_kib": EDGEXPERT["sram_kib"], "ours": ours, "edgexpert": theirs,
            "ratio": {k: ours[k] / theirs[k] for k in ("logic_area_m2", "sram_area_m2",
                                                       "area_m2", "power_w",
                                                       "energy_per_mac_j")}}


def _pm(value: float | None, scale: float, fmt: str, unit: str = "") -> str:
    """` +- error` in the value's format, or nothing without an error estimate."""
    return "" if value is None else f" +- {value * scale:{fmt}}{unit}"


def scaling_table(result: dict) -> str:
    """The scaling as markdown tables: each engine point, the fits, ours at EdgeXpert's MACs."""
    node = result["node"]
    lines = [f"| point | peak MACs/cycle | MACs/cycle (stimulus) | logic mm2 | engine SRAM mm2 "
             f"| logic energy/cycle | SRAM reads/cycle | SRAM writes/MAC | energy/MAC | "
             f"fmax {node} |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for p in result["points"].values():
        lines.append(f"| {p['block']} | {p['peak_macs']} | {p['macs_per_cycle']:.1f} | "
                     f"{p['logic_area_m2'] * 1e6:.4f} | {p['sram_area_m2'] * 1e6:.4f} | "
                     f"{format_si(p['logic_energy_per_cycle_j'], 'J')} | "
                     f"{format_si(p['sram_read_energy_per_cycle_j'], 'J')} | "
                     f"{format_si(p['sram_write_energy_per_mac_j'], 'J')} | "
                     f"{format_si(p['energy_per_mac_j'], 'J')} | "
                     f"{p['fmax_hz'] / 1e6:.0f} MHz |")
    f, rms = result["fits"], result["readings_relative_rms"]
    count = len(result["points"])

    def rms_text(key):
        return "" if rms[key] is None else f"{rms[key] * 100:.2f} %"

    def slope(fit, scale, fmt, unit):
        return f"{fit['per_mac'] * scale:{fmt}}{_pm(fit['per_mac_error'], scale, fmt)} {unit}"

    lines += ["", f"| least squares over {count} points ({node}) | fixed | per MAC "
              "(+- standard error) | residuals' rms |", "|---|---:|---:|---:|",
              f"| logic area | {f['logic_area_m2']['fixed'] * 1e12:,.0f} um2 | "
              f"{slope(f['logic_area_m2'], 1e12, '.1f', 'um2')} | |",
              f"| logic energy per cycle, a lane busy or idle alike (per MAC of the array) | "
              f"{format_si(f['logic_energy_j']['fixed'], 'J')} | "
              f"{slope(f['logic_energy_j'], 1e15, '.1f', 'fJ')} | "
              f"{rms_text('busy_or_idle_alike')} |",
              f"| logic energy per cycle, an idle lane free (per MAC done) | "
              f"{format_si(f['logic_energy_per_mac_done_j']['fixed'], 'J')} | "
              f"{slope(f['logic_energy_per_mac_done_j'], 1e15, '.1f', 'fJ')} | "
              f"{rms_text('idle_lane_free')} |"]
    o, t, r = result["ours"], result["edgexpert"], result["ratio"]
    error = o["energy_per_mac_error_j"]
    busy_hz = result["macs"] * result["utilization"] * result["clock_hz"]  # MACs done per second
    lines += ["", f"| at {result['macs']:,} MACs, {result['clock_hz'] / 1e6:.0f} MHz, utilization "
              f"{result['utilization']:g} | ours | EdgeXpert | ours / EdgeXpert |",
              "|---|---:|---:|---:|",
              f"| logic area | {o['logic_area_m2'] * 1e6:.2f}"
              f"{_pm(o['logic_area_error_m2'], 1e6, '.2f')} mm2 | "
              f"{t['logic_area_m2'] * 1e6:.1f} mm2 | {r['logic_area_m2']:.2f} |",
              f"| SRAM area ({o['engine_sram_area_m2'] * 1e6:.2f} engine memories + "
              f"{o['shared_sram_area_m2'] * 1e6:.2f} shared {result['shared_sram_kib']} KiB) | "
              f"{o['sram_area_m2'] * 1e6:.2f} mm2 | {t['sram_area_m2'] * 1e6:.1f} mm2 | "
              f"{r['sram_area_m2']:.2f} |",
              f"| total area | {o['area_m2'] * 1e6:.2f} mm2 | {t['area_m2'] * 1e6:.1f} mm2 | "
              f"{r['area_m2']:.2f} |",
              f"| power, a lane busy or idle alike ({o['logic_power_w']:.3g} W logic + "
              f"{o['sram_power_w']:.3g} W SRAM) | "
              f"{o['power_w']:.3g}{_pm(o['power_error_w'], 1, '.2g')} W | "
              f"{t['power_w']:.2f} W | {r['power_w']:.2f} |",
              (f"| power, an idle lane free ({o['logic_power_idle_free_w']:.3g} W logic) | "
               f"{o['power_idle_free_w']:.3g}"
               f"{_pm(o['energy_per_mac_idle_free_error_j'], busy_hz, '.2g')} W | "
               f"{t['power_w']:.2f} W | {o['power_idle_free_w'] / t['power_w']:.2f} |"
               if o["power_idle_free_w"] is not None else
               "| power, an idle lane free | refuted by the points (a negative fixed part) | | |"),
              f"| power without the engine's memories | {o['power_without_engine_sram_w']:.3g} W "
              f"| {t['power_w']:.2f} W | {o['power_without_engine_sram_w'] / t['power_w']:.2f} |",
              f"| **energy per MAC done** | **{o['energy_per_mac_j'] * 1e15:.0f}"
              f"{_pm(error, 1e15, '.0f')} fJ** | {t['energy_per_mac_j'] * 1e15:.0f} fJ | "
              f"**{r['energy_per_mac_j']:.2f}"
              f"{_pm(error and error / t['energy_per_mac_j'], 1, '.2f')}** |"]
    if o["energy_per_mac_idle_free_j"] is not None:
        free, free_error = o["energy_per_mac_idle_free_j"], o["energy_per_mac_idle_free_error_j"]
        lines.append(f"| energy per MAC done, an idle lane free | {free * 1e15:.0f}"
                     f"{_pm(free_error, 1e15, '.0f')} fJ | {t['energy_per_mac_j'] * 1e15:.0f} fJ "
                     f"| {free / t['energy_per_mac_j']:.2f}"
                     f"{_pm(free_error and free_error / t['energy_per_mac_j'], 1, '.2f')} |")
    reading = {None: "",
               "both": " The residuals do not decide between the two readings (neither's rms is "
                       f"{DECIDES:g} of the other's or less): both stand.",
               "busy_or_idle_alike": " The points support a lane busy or idle alike (its "
                                     f"residuals' rms the smaller by {1 / DECIDES:g}x or more).",
               "idle_lane_free": " The points support an idle lane free (its residuals' rms the "
                                 f"smaller by {1 / DECIDES:g}x or more)."
               }[result["reading_supported"]]
    lines += ["", f"Our fmax at {node} is {o['fmax_hz'] / 1e6:.0f} MHz (the slowest point); power "
              f"is at EdgeXpert's {result['clock_hz'] / 1e6:.0f} MHz (docs/synthesis.md, \"Scaling "
              "to EdgeXpert's 8K MACs\"); errors are the fit's standard errors at 8K, the energy "
              "per MAC's from the logic energy's line (the 'busy or idle alike' reading)"
              + (" (none with two points)" if count == 2 else "") + "." + reading
              + " The points were synthesized "
              + ("with clock gates (synth.clock_gating)." if result["clock_gated"] else
                 "without clock gates (synth.clock_gating off).")]
    return "\n".join(lines)
