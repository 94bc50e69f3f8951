"""The cost table the performance model reads: energy per action and area per block.

Format (JSON, `build/synth/costs.json`, written by `edgexpert synth --all`):

    {"schema": "edgexpert-costs/2",
     "node": "28 nm, 1.0 V",
     "scaling": {"area": 0.0200, "delay": 0.1375, "energy": 0.0173},
     "costs": {"mac_lane.energy_per_mac": {"value": 3.2e-13, "unit": "J",
                                           "source": "synth mac_lane key ... x ..."},
               "dram.energy_per_bit.accelergy_lpddr4": {"value": 8e-12, "unit": "J/bit",
                                              "source": "Accelergy ..."}, ...}}

Every value is in SI units (`unit` says which) with its `source`: the synthesis run (block name
and cache key, and the scaling factor applied), the CACTI run (its inputs, outputs and cache key)
or a citation. Counts of actions stay apart from this table: a model's energy is
sum(count x cost) (`CostTable.energy_j`).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping

from ..contracts.config import ConfigError
from ..support.tools import build_root
from .cacti import describe

__all__ = ["SCHEMA", "UNITS", "Cost", "CostTable", "CostTableError", "build_cost_table",
           "write_cost_table", "load_cost_table", "load_table_data", "default_cost_table_path",
           "CITED_COSTS"]

SCHEMA = "edgexpert-costs/2"
#: units a cost may have; "J" is energy per action, "J/bit" per bit moved
UNITS = ("J", "J/bit", "m2", "Hz", "W")

_HOROWITZ = ("M. Horowitz, \"Computing's energy problem (and what we can do about it)\", ISSCC "
             "2014, 45 nm, 0.9 V")
_ACCELERGY = ("Accelergy's DRAM model (Y. N. Wu, J. S. Emer, V. Sze, \"Accelergy: an "
              "architecture-level energy estimation methodology for accelerator designs\", ICCAD "
              "2019) as shipped in hwcomponents-cacti 1.0.40 (hwcomponents_cacti.py, DRAM type "
              "LPDDR4: 8 pJ/bit)")
#: the SRAM costs per kind, as the table names them: (report field, key part, unit)
_SRAM_FIELDS = (("read_energy_per_bit_j", "read_energy_per_bit", "J/bit"),
                ("write_energy_per_bit_j", "write_energy_per_bit", "J/bit"),
                ("area_m2", "area", "m2"), ("leakage_w", "leakage", "W"))


#: costs that come from the literature, not from a synthesis run: (name, value, unit, source)
CITED_COSTS = (
    ("dram.energy_per_bit.accelergy_lpddr4", 8e-12, "J/bit", _ACCELERGY),
    ("dram.energy_per_bit.horowitz_low", 1.3e-9 / 64, "J/bit",
     _HOROWITZ + ": DRAM 1.3 nJ per 64-bit access"),
    ("dram.energy_per_bit.horowitz_high", 2.6e-9 / 64, "J/bit",
     _HOROWITZ + ": DRAM 2.6 nJ per 64-bit access"),
    ("horowitz_45nm.add_8b", 0.03e-12, "J", _HOROWITZ),
    ("horowitz_45nm.mult_8b", 0.2e-12, "J", _HOROWITZ),
    ("horowitz_45nm.add_32b", 0.1e-12, "J", _HOROWITZ),
    ("horowitz_45nm.sram_read_64b.8KB", 10e-12, "J", _HOROWITZ),
    ("horowitz_45nm.sram_read_64b.32KB", 20e-12, "J", _HOROWITZ),
    ("horowitz_45nm.sram_read_64b.1MB", 100e-12, "J", _HOROWITZ),
)


class CostTableError(ConfigError):
    """The cost table is missing or malformed; the message is one line."""


@dataclass(frozen=True)
class Cost:
    value: float
    unit: str
    source: str


@dataclass(frozen=True)
class CostTable:
    node: str
    costs: Mapping[str, Cost]
    #: the 180 nm -> target node factors the synthesis report applied (synth/scaling.py); empty in a
    #: table without synthesis runs
    scaling: Mapping[str, float] = field(default_factory=dict)

    def cost(self, name: str) -> Cost:
        try:
            return self.costs[name]
        except KeyError:
            raise CostTableError(f"cost {name!r} is not in the table: accepted "
                                 f"{', '.join(sorted(self.costs))}") from None

    def energy_j(self, counts: Mapping[str, float]) -> float:
        """Total energy of `counts` actions: sum of count x energy per action (J or J/bit)."""
        total = 0.0
        for name, count in counts.items():
            cost = self.cost(name)
            if cost.unit not in ("J", "J/bit"):
                raise CostTableError(f"cost {name!r} is in {cost.unit}, not an energy per action: "
                                     "accepted units J, J/bit")
            total += count * cost.value
        return total


def _slug(text: str) -> str:
    return "".join(c if c.isalnum() else "_" for c in text.lower()).strip("_")


def build_cost_table(report: dict) -> dict:
    """The cost table (JSON form) of a synthesis report (`report.write_reports`)."""
    scaling = report["scaling"]
    costs: dict[str, dict] = {}
    for name, block in report["blocks"].items():
        m, s = block["measured_180nm"], block["scaled"]
        gated = (f"; {m['clock_gating']['gates']} clock gates" if m.get("clock_gating")
                 else "")
        run = (f"synth {name} key {block['key']} ({m['node']}; "
               f"{', '.join(f'{k}={v}' for k, v in block['parameters'].items())}{gated})")
        sources = scaling["sources"]
        area = f"area x{scaling['area']:.4f} ({sources['area']})"
        if block["memories"]:
            area += (f" + a CACTI 7 run at {scaling['node_nm']} nm per memory (the memories' "
                     "sram_area entries)")
        costs[f"{name}.area"] = {"value": s["area_mm2"] * 1e-6, "unit": "m2",
                                 "source": f"{run} x {area}"}
        costs[f"{name}.area_180nm"] = {"value": m["area_um2"] * 1e-12, "unit": "m2",
                                       "source": f"{run}: Yosys stat, logic only"}
        costs[f"{name}.fmax"] = {"value": s["fmax_hz"], "unit": "Hz",
                                 "source": f"{run}: OpenSTA; delay x{scaling['delay']:.4f} "
                                           f"({sources['delay']})"}
        if block["power_measured"]:
            op = _slug(m["operation"])
            stim = (f"OpenSTA power, {m['cycles']} cycles of {m['stimulus']['drive']} "
                    f"seed {m['seed']}")
            bounded = s["sram_upper_bound_memories"]
            bounds = (f"; upper bounds for {', '.join(bounded)} (enables not evaluated: charged "
                      "as accessed every cycle)" if bounded else "")
            costs[f"{name}.energy_per_{op}"] = {
                "value": s["energy_per_op_j"], "unit": "J",
                "source": f"{run}: {stim}; energy x{scaling['energy']:.4f} "
                          f"({sources['energy']})"
                          + (" + bits read and written x CACTI 7 read and write energy per bit"
                             + bounds if block["memories"] else "")}
            costs[f"{name}.energy_per_{op}_180nm"] = {
                "value": m["energy_per_op_j"], "unit": "J", "source": f"{run}: {stim}, logic only"}
            # a clock cycle as the action: with energy per operation it gives the stimulus's
            # operations per cycle, which the scaling to EdgeXpert fits against (mac_scaling.py)
            costs[f"{name}.energy_per_cycle_180nm"] = {
                "value": m["total_w"] / m["clock_hz"], "unit": "J",
                "source": f"{run}: {stim} ({m['operations_per_cycle']:.6g} operations "
                          f"({m['operation']}) per cycle), logic only"}
            if block["memories"]:
                # reads and writes apart: the scaling to EdgeXpert scales them differently
                for part, done in (("read", "read"), ("write", "written")):
                    costs[f"{name}.sram_{part}_energy_per_{op}"] = {
                        "value": s[f"sram_{part}_energy_per_op_j"], "unit": "J",
                        "source": f"{run}: {stim}; bits {done} x CACTI 7 {part} energy per "
                                  f"bit, all its memories{bounds}"}
        for mem in block["memories"]:
            sram, prefix = mem["sram"], f"{name}.{_slug(mem['name'])}"
            # sram_energy_per_bit is the read energy: the name the table has always had
            for report_field, part, unit in _SRAM_FIELDS:
                key = "sram_energy_per_bit" if part == "read_energy_per_bit" else f"sram_{part}"
                costs[f"{prefix}.{key}"] = {"value": sram[report_field], "unit": unit,
                                            "source": describe(sram)}
    for kind, sram in report.get("sram", {}).items():
        for report_field, part, unit in _SRAM_FIELDS:
            costs[f"sram.{part}.{kind}"] = {"value": sram[report_field], "unit": unit,
                                            "source": describe(sram)}
    for name, value, unit, source in CITED_COSTS:
        costs[name] = {"value": value, "unit": unit, "source": source}
    return {"schema": SCHEMA, "node": f"{scaling['node_nm']} nm, {scaling['vdd_v']} V",
            "scaling": {q: scaling[q] for q in ("area", "delay", "energy")}, "costs": costs}


def write_cost_table(path: Path, table: dict) -> None:
    load_table_data(table, str(path))  # never write a table the loader would refuse
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(table, indent=2, sort_keys=True))


def default_cost_table_path() -> Path:
    return build_root() / "synth" / "costs.json"


def load_table_data(data, origin: str) -> CostTable:
    """Validate a cost table already parsed from JSON; `origin` names it in errors."""
    if not isinstance(data, dict):
        raise CostTableError(f"{origin} must hold a JSON object, not {type(data).__name__}")
    if data.get("schema") != SCHEMA:
        raise CostTableError(f"{origin}: schema {data.get('schema')!r} is not supported: "
                             f"accepted {SCHEMA!r}")
    costs = data.get("costs")
    if not isinstance(costs, dict) or not costs:
        raise CostTableError(f"{origin}: costs must be a non-empty object of "
                             "{name: {value, unit, source}}")
    out = {}
    for name, entry in costs.items():
        where = f"{origin}: costs.{name}"
        if not isinstance(entry, dict) or set(entry) != {"value", "unit", "source"}:
            keys = sorted(entry) if isinstance(entry, dict) else type(entry).__name__
            raise CostTableError(f"{where} has {keys}: accepted exactly value, unit, source")
        value = entry["value"]
        if isinstance(value, bool) or not isinstance(value, (int, float)) \
                or not math.isfinite(value) or value < 0:
            raise CostTableError(f"{where}.value = {value!r} is out of range: accepted finite "
                                 "numbers >= 0")
        if entry["unit"] not in UNITS:
            raise CostTableError(f"{where}.unit = {entry['unit']!r} is not known: accepted "
                                 f"{', '.join(UNITS)}")
        if not isinstance(entry["source"], str) or not entry["source"].strip():
            raise CostTableError(f"{where}.source is empty: accepted a synthesis run or a "
                                 "citation")
        out[name] = Cost(float(value), entry["unit"], entry["source"])
    scaling = data.get("scaling", {})
    if not isinstance(scaling, dict) or not all(
            isinstance(v, (int, float)) and not isinstance(v, bool) and 0 < v <= 1
            for v in scaling.values()):
        raise CostTableError(f"{origin}: scaling = {scaling!r} is malformed: accepted "
                             "{area, delay, energy} factors in 0..1")
    return CostTable(str(data.get("node", "")), out, scaling)


def load_cost_table(path: Path | str | None = None) -> CostTable:
    """Read and validate the cost table (default: build/synth/costs.json)."""
    path = Path(path) if path is not None else default_cost_table_path()
    try:
        text = path.read_text()
    except OSError as exc:
        raise CostTableError(f"cannot read cost table {path}: {exc.strerror}; run "
                             "`edgexpert synth --all` to write it") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise CostTableError(f"{path} is not valid JSON: {exc.msg} at line {exc.lineno}") \
            from None
    return load_table_data(data, str(path))
