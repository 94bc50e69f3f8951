"""From the measured 180 nm figures to 28 nm, and the SRAM model: every constant with its source.

Logic: Stillmaker & Baas fitted delay and energy per operation of each node as polynomials in the
supply voltage (their Tables; the HP 32 nm and 65 nm energy rows are confirmed by the authors'
erratum), and tabulated area between nodes. 28 nm is not one of their rows: each factor is
interpolated geometrically between the 32 nm and 20 nm (high-performance) rows,

    f(28) = f(32) ** (1 - t) * f(20) ** t,   t = ln(32/28) / ln(32/20) = 0.284,

i.e. linearly in log(factor) over log(feature size), the way these quantities scale. The source
is always osu018 at its liberty corner, 180 nm at 1.8 V.

SRAM: CACTI 7 runs at 28 nm (itrs-lstp cells, 512-bit port): area and read energy per bit at
64 KiB, 512 KiB and 1 MiB. Between the points both are interpolated linearly in log-log; outside
them the nearest point's per-bit figures are kept (area proportional to bits).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

__all__ = ["STILLMAKER_BAAS", "CACTI_28NM", "SOURCE_NODE", "NodeScaling", "scale_to_28nm",
           "SramCost", "sram_cost", "TARGET_NODE_NM"]

STILLMAKER_BAAS = ("A. Stillmaker and B. Baas, \"Scaling equations for the accurate prediction of "
                   "CMOS device performance from 180 nm to 7 nm\", Integration, the VLSI Journal "
                   "58 (2017) 74-81, doi:10.1016/j.vlsi.2017.02.002; polynomial coefficients as "
                   "tabulated there (erratum-corrected)")
CACTI_28NM = ("CACTI 7 (R. Balasubramonian et al., ACM TACO 14(2), 2017) runs at 28 nm, itrs-lstp "
              "cells, 512-bit port, recorded in shared/TOOLCHAIN.md")

#: where every synthesized figure comes from
SOURCE_NODE = {"node_nm": 180, "vdd_v": 1.8, "cells": "osu018 (typical liberty corner)"}
TARGET_NODE_NM = 28

# Stillmaker & Baas polynomial coefficients, highest power first, in the paper's relative units.
# delay(V): 180 nm is quadratic, HP 32 nm cubic, HP 20 nm quadratic; energy(V) per operation.
_DELAY = {180: (0.0, 97.09, -356.7, 406.5), 32: (-1047.0, 2982.0, -2797.0, 873.5),
          20: (0.0, 34.63, -66.37, 41.15)}
_ENERGY = {180: (0.0, 24.64, -17.98), 32: (0.8367, -0.4341, 0.1701),
           20: (0.373, -0.1582, 0.04104)}
# area of a 180 nm design at node N, as a fraction (their area table: 180 -> 32 nm / 40,
# 180 -> 20 nm / 88)
_AREA_FROM_180 = {32: 1 / 40, 20: 1 / 88}
# interpolation weight of the 20 nm row at 28 nm
_T = math.log(32 / TARGET_NODE_NM) / math.log(32 / 20)


def _poly(coefficients: tuple[float, ...], v: float) -> float:
    return sum(c * v ** (len(coefficients) - 1 - i) for i, c in enumerate(coefficients))


def _interpolate(f32: float, f20: float) -> float:
    return f32 ** (1 - _T) * f20 ** _T


@dataclass(frozen=True)
class NodeScaling:
    """Multiply a 180 nm (1.8 V) figure by these to get its 28 nm figure at `vdd_v`."""
    node_nm: int
    vdd_v: float
    area: float
    delay: float
    energy: float
    weight_20nm: float
    rows: dict
    source: str = STILLMAKER_BAAS

    def to_json(self) -> dict:
        return asdict(self)


def scale_to_28nm(vdd_v: float) -> NodeScaling:
    """Factors from osu018 180 nm at 1.8 V to 28 nm at `vdd_v` (interpolated, see module doc)."""
    d180 = _poly(_DELAY[180], SOURCE_NODE["vdd_v"])
    e180 = _poly(_ENERGY[180], SOURCE_NODE["vdd_v"])
    delay = {n: _poly(_DELAY[n], vdd_v) / d180 for n in (32, 20)}
    energy = {n: _poly(_ENERGY[n], vdd_v) / e180 for n in (32, 20)}
    return NodeScaling(
        node_nm=TARGET_NODE_NM, vdd_v=vdd_v,
        area=_interpolate(_AREA_FROM_180[32], _AREA_FROM_180[20]),
        delay=_interpolate(delay[32], delay[20]),
        energy=_interpolate(energy[32], energy[20]),
        weight_20nm=_T,
        rows={"32nm": {"area": _AREA_FROM_180[32], "delay": delay[32], "energy": energy[32]},
              "20nm": {"area": _AREA_FROM_180[20], "delay": delay[20], "energy": energy[20]}})


# --- SRAM at 28 nm ----------------------------------------------------------------------------

_KIB = 1024 * 8
#: (capacity bits, read energy J/bit, area m2): CACTI 7 at 28 nm (see CACTI_28NM)
CACTI_POINTS = ((64 * _KIB, 0.063e-12, 0.086e-6),
                (512 * _KIB, 0.236e-12, 0.87e-6),
                (1024 * _KIB, 0.379e-12, 1.81e-6))


@dataclass(frozen=True)
class SramCost:
    bits: int
    area_m2: float
    read_energy_per_bit_j: float
    rule: str
    source: str = CACTI_28NM

    def to_json(self) -> dict:
        return asdict(self)


def sram_cost(bits: int) -> SramCost:
    """28 nm area and energy per bit read (writes are costed alike) of an SRAM of `bits`."""
    if bits <= 0:
        raise ValueError(f"an SRAM needs at least one bit, not {bits}")
    low, high = CACTI_POINTS[0], CACTI_POINTS[-1]
    if bits < low[0]:
        return SramCost(bits, low[2] * bits / low[0], low[1],
                        "below 64 KiB: the 64 KiB density and energy per bit, scaled by bits "
                        "(periphery makes small arrays larger per bit, so area is a lower bound)")
    if bits > high[0]:
        return SramCost(bits, high[2] * bits / high[0], high[1],
                        "above 1 MiB: the 1 MiB density and energy per bit, scaled by bits")
    (b0, e0, a0), (b1, e1, a1) = next(
        pair for pair in zip(CACTI_POINTS, CACTI_POINTS[1:]) if bits <= pair[1][0])
    t = math.log(bits / b0) / math.log(b1 / b0)
    return SramCost(bits, a0 ** (1 - t) * a1 ** t, e0 ** (1 - t) * e1 ** t,
                    f"log-log interpolation between the {b0 // _KIB} KiB and {b1 // _KIB} KiB "
                    "CACTI points")
