"""From the measured 180 nm logic figures to 28 nm: every constant with its source.

Logic: Stillmaker & Baas fitted delay and energy per operation of each node as polynomials in the
supply voltage (their Tables; the HP 32 nm and 65 nm energy rows are confirmed by the authors'
erratum), and tabulated area between nodes. 28 nm is not one of their rows: each factor is
interpolated geometrically between the 32 nm and 20 nm (high-performance) rows,

    f(28) = f(32) ** (1 - t) * f(20) ** t,   t = ln(32/28) / ln(32/20) = 0.284,

i.e. linearly in log(factor) over log(feature size), the way these quantities scale. The source
is always osu018 at its liberty corner, 180 nm at 1.8 V.

Memories are not scaled: CACTI models them at 28 nm directly (cacti.py).

Each factor is a setting (`synth.scaling.area`, `.delay`, `.energy`): null, the default, is the
derived factor above; a number replaces it (`node_scaling`), and the report names it as set.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, replace

from ..contracts.config import SynthConfig

__all__ = ["STILLMAKER_BAAS", "SOURCE_NODE", "NodeScaling", "scale_to_28nm", "node_scaling",
           "TARGET_NODE_NM"]

STILLMAKER_BAAS = ("A. Stillmaker and B. Baas, \"Scaling equations for the accurate prediction of "
                   "CMOS device performance from 180 nm to 7 nm\", Integration, the VLSI Journal "
                   "58 (2017) 74-81, doi:10.1016/j.vlsi.2017.02.002; polynomial coefficients as "
                   "tabulated there (erratum-corrected)")

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
    #: the factors given as settings (synth.scaling.*) instead of derived
    set_in_config: tuple[str, ...] = ()

    def to_json(self) -> dict:
        out = asdict(self)
        # one line per factor, for the report and the cost table's sources
        derived = {"area": "Stillmaker & Baas 2017, 28 nm",
                   "delay": f"Stillmaker & Baas 2017, 28 nm {self.vdd_v} V",
                   "energy": f"Stillmaker & Baas 2017, 28 nm {self.vdd_v} V"}
        out["sources"] = {q: f"synth.scaling.{q} setting" if q in self.set_in_config else text
                          for q, text in derived.items()}
        return out


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


def node_scaling(synth: SynthConfig) -> NodeScaling:
    """The factors a synthesis report applies: derived at `synth.target_vdd_v`, each replaced by
    its `synth.scaling` setting where one is given."""
    derived = scale_to_28nm(synth.target_vdd_v)
    given = {q: v for q, v in asdict(synth.scaling).items() if v is not None}
    return replace(derived, **given, set_in_config=tuple(given))
