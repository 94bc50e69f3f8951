"""From the measured 180 nm logic figures to the target node: every constant with its source.

Logic: Stillmaker & Baas fitted delay and energy per operation of each node as polynomials in the
supply voltage (their Tables; the HP 32 nm and 65 nm energy rows are confirmed by the authors'
erratum), and tabulated area between nodes. The target node is a setting (`synth.target_node_nm`,
22..65 nm, default 28, EdgeXpert's). A node between two of the rows kept here (65 nm bulk; 45,
32 and 20 nm high-performance) takes each factor interpolated geometrically between them, e.g.
at 28 nm between the 32 nm and 20 nm rows,

    f(28) = f(32) ** (1 - t) * f(20) ** t,   t = ln(32/28) / ln(32/20) = 0.284,

i.e. linearly in log(factor) over log(feature size), the way these quantities scale. The source
is always osu018 at its liberty corner, 180 nm at 1.8 V.

Memories are not scaled: CACTI models them at the target node directly (cacti.py).

Each factor is a setting (`synth.scaling.area`, `.delay`, `.energy`): null, the default, is the
derived factor above; a number replaces it (`node_scaling`), and the report names it as set.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, replace

from ..contracts.config import TARGET_NODE_RANGE_NM, SynthConfig

__all__ = ["STILLMAKER_BAAS", "SOURCE_NODE", "NodeScaling", "scale_to_node", "node_scaling"]

STILLMAKER_BAAS = ("A. Stillmaker and B. Baas, \"Scaling equations for the accurate prediction of "
                   "CMOS device performance from 180 nm to 7 nm\", Integration, the VLSI Journal "
                   "58 (2017) 74-81, doi:10.1016/j.vlsi.2017.02.002; polynomial coefficients as "
                   "tabulated there (erratum-corrected)")

#: where every synthesized figure comes from
SOURCE_NODE = {"node_nm": 180, "vdd_v": 1.8, "cells": "osu018 (typical liberty corner)"}

# Stillmaker & Baas polynomial coefficients, highest power first, in the paper's relative units:
# delay(V) cubic (quadratic where the leading one is 0), energy(V) per operation quadratic. 180 and
# 65 nm are their bulk rows, 45, 32 and 20 nm their high-performance (HP) rows.
_DELAY = {180: (0.0, 97.09, -356.7, 406.5), 65: (-53.3, 230.4, -333.9, 178.6),
          45: (-501.6, 1567.0, -1619.0, 566.1), 32: (-1047.0, 2982.0, -2797.0, 873.5),
          20: (0.0, 34.63, -66.37, 41.15)}
_ENERGY = {180: (0.0, 24.64, -17.98), 65: (3.755, -4.398, 1.975),
           45: (1.018, -0.3107, 0.1539), 32: (0.8367, -0.4341, 0.1701),
           20: (0.373, -0.1582, 0.04104)}
# area of a 180 nm design at node N, as a fraction (their area table, 180 nm -> N: / 12, / 19,
# / 40, / 88)
_AREA_FROM_180 = {65: 1 / 12, 45: 1 / 19, 32: 1 / 40, 20: 1 / 88}


def _poly(coefficients: tuple[float, ...], v: float) -> float:
    return sum(c * v ** (len(coefficients) - 1 - i) for i, c in enumerate(coefficients))


def _rows(node_nm: int) -> tuple[int, int, float]:
    """The rows around `node_nm` (the larger node first; one row twice at a row's node) and the
    smaller one's interpolation weight, ln(larger / node) / ln(larger / smaller)."""
    lo, hi = TARGET_NODE_RANGE_NM
    if not lo <= node_nm <= hi:
        raise ValueError(f"target node {node_nm} nm is out of range: accepted {lo}..{hi} nm")
    # the range's ends lie within the rows (65 nm is one; 22 nm is above 20)
    larger = min(n for n in _AREA_FROM_180 if n >= node_nm)
    smaller = max(n for n in _AREA_FROM_180 if n <= node_nm)
    if larger == smaller:
        return larger, smaller, 0.0
    return larger, smaller, math.log(larger / node_nm) / math.log(larger / smaller)


@dataclass(frozen=True)
class NodeScaling:
    """Multiply a 180 nm (1.8 V) figure by these to get its figure at `node_nm` and `vdd_v`;
    `rows` are the paper's two rows it lies between, `weight` the smaller node's share."""
    node_nm: int
    vdd_v: float
    area: float
    delay: float
    energy: float
    weight: float
    rows: dict
    source: str = STILLMAKER_BAAS
    #: the factors given as settings (synth.scaling.*) instead of derived
    set_in_config: tuple[str, ...] = ()

    @property
    def node(self) -> str:
        """The target point in words, as the report and the cost table name it."""
        return f"{self.node_nm} nm, {self.vdd_v} V"

    def to_json(self) -> dict:
        out = asdict(self)
        # one line per factor, for the report and the cost table's sources
        derived = {"area": f"Stillmaker & Baas 2017, {self.node_nm} nm",
                   "delay": f"Stillmaker & Baas 2017, {self.node}",
                   "energy": f"Stillmaker & Baas 2017, {self.node}"}
        out["sources"] = {q: f"synth.scaling.{q} setting" if q in self.set_in_config else text
                          for q, text in derived.items()}
        return out


def scale_to_node(node_nm: int, vdd_v: float) -> NodeScaling:
    """Factors from osu018 180 nm at 1.8 V to `node_nm` at `vdd_v` (interpolated between the
    paper's rows, see module doc). Raises ValueError outside `TARGET_NODE_RANGE_NM`."""
    larger, smaller, t = _rows(node_nm)
    d180 = _poly(_DELAY[180], SOURCE_NODE["vdd_v"])
    e180 = _poly(_ENERGY[180], SOURCE_NODE["vdd_v"])
    rows = {f"{n}nm": {"area": _AREA_FROM_180[n], "delay": _poly(_DELAY[n], vdd_v) / d180,
                       "energy": _poly(_ENERGY[n], vdd_v) / e180} for n in (larger, smaller)}
    big, small = rows[f"{larger}nm"], rows[f"{smaller}nm"]
    factor = {q: big[q] ** (1 - t) * small[q] ** t for q in ("area", "delay", "energy")}
    return NodeScaling(node_nm=node_nm, vdd_v=vdd_v, **factor, weight=t, rows=rows)


def node_scaling(synth: SynthConfig) -> NodeScaling:
    """The factors a synthesis report applies: derived at `synth.target_node_nm` and
    `synth.target_vdd_v`, each replaced by its `synth.scaling` setting where one is given."""
    derived = scale_to_node(synth.target_node_nm, synth.target_vdd_v)
    given = {q: v for q, v in asdict(synth.scaling).items() if v is not None}
    return replace(derived, **given, set_in_config=tuple(given))
