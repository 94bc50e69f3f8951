"""Per-block cost report: the measured 180 nm figures and their scaling to the target node
(`synth.target_node_nm`, 28 nm by default), side by side.

`block_report` runs (or reads from the cache) one block's synthesis, timing and power and adds
the target node's figures; `write_reports` writes build/synth/report.json, report.md and the cost table
(`costs.py`) for a set of blocks. Every number is either measured (a Yosys / OpenSTA run, named
by its cache key), derived from a measured number by a cited factor (scaling.py), or a CACTI run
at the target node (cacti.py, named by its cache key): every memory cut out of a block, the reference SRAM
sizes and the configured weight buffer.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

from ..contracts.config import Config
from ..support.progress import progress_bar
from ..support.provenance import record
from ..support.tools import build_root
from .cacti import CACTI_7, SramSpec, cacti_settings, sram_cost
from .costs import build_cost_table, write_cost_table
from .flow import SynthResult, synthesize
from .scaling import SOURCE_NODE, STILLMAKER_BAAS, node_scaling

__all__ = ["run_block", "summarize", "block_report", "write_reports", "markdown_report",
           "format_si", "report_paths", "reference_srams", "plural"]

#: SRAM sizes the cost table always prices (KiB), with EdgeXpert's 512 KB shared SRAM among them;
#: one 512-bit read-write port, one bank
REFERENCE_SRAM_KIB = (64, 512, 1024)
REFERENCE_PORT_BITS = 512


def run_block(block, config: Config, phase=lambda text: None) -> SynthResult:
    """Synthesis, timing and (with a stimulus) power of a registered block at `config`;
    `phase(text)` is told as each part starts (the command line's progress lines)."""
    stimulus = None
    if block.stimulus:
        phase("the power stimulus (the block simulated on its workload)")
        stimulus = block.stimulus(config)
    phase("elaborating; Yosys synthesis on osu018, OpenSTA timing and power (or the cache)")
    return synthesize(block.build(config), block.name, config.synth, stimulus)


def block_report(block, config: Config) -> dict:
    """One block's costs at `config`: measured at 180 nm and scaled to the target node."""
    return summarize(block, config, run_block(block, config))


def summarize(block, config: Config, result: SynthResult) -> dict:
    """The report entry of a synthesis result: measured figures and their scaling."""
    scaling = node_scaling(config.synth)
    power = result.power
    measured = {
        "node": result.node, "cells": result.cells, "flip_flops": result.flip_flops,
        "area_um2": result.area_um2, "critical_path_ns": result.critical_path_ns,
        "fmax_hz": result.fmax_hz, "startpoint": result.startpoint, "endpoint": result.endpoint,
    }
    if result.clock_gating is not None:
        measured["clock_gating"] = result.clock_gating
    accesses = {a["name"]: a for a in (power or {}).get("memory_accesses", [])}
    memories, sram_area, sram_read, sram_write = [], 0.0, 0.0, 0.0
    # memories whose enables the activity evaluation could not compute, charged as accessed
    # every cycle (flow._memory_accesses): their SRAM energy, an upper bound
    bounded: dict[str, float] = {}
    for m in result.memories:
        # the memory's ports as the RTL declares them (module doc of cacti.py)
        sram = sram_cost(SramSpec(m["width"], m["depth"], read_ports=m["read_ports"],
                                  write_ports=m["write_ports"]), scaling.node_nm)
        entry = {**{k: m[k] for k in ("name", "width", "depth", "read_ports", "write_ports",
                                      "sync_read_ports")},
                 "bits": m["width"] * m["depth"], "sram": sram.to_json()}
        sram_area += sram.area_m2
        if m["name"] in accesses:
            acc = accesses[m["name"]]
            entry["accesses"] = acc
            read = acc["read_bits"] * sram.read_energy_per_bit_j
            write = acc["write_bits"] * sram.write_energy_per_bit_j
            sram_read += read
            sram_write += write
            if not acc["enables_evaluated"]:
                bounded[m["name"]] = read + write
        memories.append(entry)
    scaled = {
        "node_nm": scaling.node_nm, "vdd_v": scaling.vdd_v,
        "logic_area_mm2": result.area_um2 * scaling.area * 1e-6,
        "sram_area_mm2": sram_area * 1e6,
        "area_mm2": result.area_um2 * scaling.area * 1e-6 + sram_area * 1e6,
        "fmax_hz": result.fmax_hz / scaling.delay,
    }
    if power is not None:
        ops = power["operations"]
        measured.update({k: power[k] for k in (
            "clock_hz", "internal_w", "switching_w", "dynamic_w", "leakage_w", "total_w",
            "energy_per_op_j", "operation", "operations", "operations_per_cycle", "cycles",
            "seed", "activity", "stimulus")})
        logic = power["energy_per_op_j"] * scaling.energy
        scaled.update({"operation": power["operation"], "logic_energy_per_op_j": logic,
                       "sram_energy_per_op_j": (sram_read + sram_write) / ops,
                       "sram_read_energy_per_op_j": sram_read / ops,
                       "sram_write_energy_per_op_j": sram_write / ops,
                       "sram_upper_bound_memories": sorted(bounded),
                       "sram_upper_bound_energy_per_op_j": sum(bounded.values()) / ops,
                       "energy_per_op_j": logic + (sram_read + sram_write) / ops})
    return {"block": block.name, "description": block.description,
            "parameters": block.parameters(config), "key": result.key,
            "cached": result.cached, "work_dir": result.work_dir,
            "measured_180nm": measured, "scaled": scaled, "memories": memories,
            "power_measured": power is not None}


def reference_srams(config: Config) -> dict[str, SramSpec]:
    """The SRAMs the cost table prices besides the blocks' memories: the reference sizes, and the
    configured weight buffer as one banked SRAM (hardware.ema: buffer_bytes over buffer_banks
    banks, an AXI-data-wide line, one read and one write port per bank as hw/ema/ builds it)."""
    srams = {_size(kib): SramSpec(REFERENCE_PORT_BITS, kib * 8192 // REFERENCE_PORT_BITS,
                                  rw_ports=1) for kib in REFERENCE_SRAM_KIB}
    ema = config.hardware.ema
    srams["weight_buffer"] = SramSpec(ema.axi_data_width,
                                      ema.buffer_bytes * 8 // ema.axi_data_width,
                                      read_ports=1, write_ports=1, banks=ema.buffer_banks)
    return srams


def _size(kib: int) -> str:
    return f"{kib // 1024}MiB" if kib >= 1024 else f"{kib}KiB"


def report_paths() -> dict[str, Path]:
    root = build_root() / "synth"
    return {"json": root / "report.json", "markdown": root / "report.md",
            "costs": root / "costs.json"}


def write_reports(blocks, config: Config, progress: bool = True) -> dict:
    """Reports and cost table for `blocks` at `config`; returns the JSON report. `progress`: a
    bar over the blocks (each a Yosys, OpenSTA and power run, or the cache)."""
    scaling = node_scaling(config.synth)
    reports = {}
    bar = progress_bar(blocks, desc="synth", unit="block", enabled=progress)
    for block in bar:
        bar.set_postfix_str(block.name)
        reports[block.name] = block_report(block, config)
    report = {
        "source_node": SOURCE_NODE,
        "synth_config": asdict(config.synth),
        "scaling": scaling.to_json(), "sram_model": cacti_settings(scaling.node_nm),
        "sram": {name: sram_cost(spec, scaling.node_nm).to_json()
                      for name, spec in reference_srams(config).items()},
        "blocks": reports,
    }
    paths = report_paths()
    paths["json"].parent.mkdir(parents=True, exist_ok=True)
    stored = json.loads(json.dumps(report))
    for entry in stored["blocks"].values():
        del entry["cached"], entry["work_dir"]
    paths["json"].write_text(json.dumps(stored, indent=2, sort_keys=True))
    record(paths["json"])
    paths["markdown"].write_text(markdown_report(report))
    write_cost_table(paths["costs"], build_cost_table(report))
    return report


def format_si(value: float, unit: str) -> str:
    for scale, prefix in ((1e-15, "f"), (1e-12, "p"), (1e-9, "n"), (1e-6, "u"), (1e-3, "m")):
        if abs(value) < scale * 1000:
            return f"{value / scale:.3g} {prefix}{unit}"
    return f"{value:.3g} {unit}"


def plural(operation: str) -> str:
    """"byte fetched" -> "bytes fetched", "MAC" -> "MACs": the noun is the first word."""
    noun, _, rest = operation.partition(" ")
    return f"{noun}s{' ' + rest if rest else ''}"


def _sram_line(sram: dict) -> str:
    return (f"{sram['area_m2'] * 1e12:,.0f} um2, read "
            f"{format_si(sram['read_energy_per_bit_j'], 'J')}/bit, write "
            f"{format_si(sram['write_energy_per_bit_j'], 'J')}/bit, access "
            f"{sram['access_time_s'] * 1e9:.3g} ns, leakage {format_si(sram['leakage_w'], 'W')} "
            f"(CACTI key `{sram['key']}`; {sram['rule']})")


def markdown_report(report: dict) -> str:
    """The human-readable report: one table, then what each column is and where it comes from."""
    scaling, model = report["scaling"], report["sram_model"]
    node = f"{scaling['node_nm']} nm"
    rows = [f"| block | parameters | cells | area 180 nm (um2) | area {node} (mm2) | "
            f"fmax 180 nm (MHz) | fmax {node} (MHz) | dynamic / leakage 180 nm | "
            f"energy/op 180 nm | energy/op {node} |",
            "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    notes = []
    for name, b in report["blocks"].items():
        m, s = b["measured_180nm"], b["scaled"]
        params = ", ".join(f"{k}={v}" for k, v in b["parameters"].items())
        if b["power_measured"]:
            power = (f"{format_si(m['dynamic_w'], 'W')} / {format_si(m['leakage_w'], 'W')} at "
                     f"{m['clock_hz'] / 1e6:.0f} MHz")
            e180 = f"{format_si(m['energy_per_op_j'], 'J')}/{m['operation']}"
            e_node = f"{format_si(s['energy_per_op_j'], 'J')}/{s['operation']}"
        else:
            power = e180 = e_node = "no stimulus"
        rows.append(f"| {name} | {params} | {m['cells']:,} | {m['area_um2']:,.0f} | "
                    f"{s['area_mm2']:.4g} | {m['fmax_hz'] / 1e6:.1f} | {s['fmax_hz'] / 1e6:.0f} | "
                    f"{power} | {e180} | {e_node} |")
        notes.append(f"- **{name}** (key `{b['key']}`): critical path "
                     f"{m['critical_path_ns']:.3f} ns from {m['startpoint']} to {m['endpoint']}; "
                     f"{m['flip_flops']} flip-flops"
                     + (f", {m['clock_gating']['gates']:,} clock gates over "
                        f"{m['clock_gating']['gated_flip_flops']:,} of them"
                        if m.get("clock_gating") else "") + ".")
        if b["power_measured"]:
            a = m["activity"]
            notes.append(
                f"  Power: {m['cycles']} cycles of `{m['stimulus']['drive']}` "
                f"({m['stimulus']['params']}), seed {m['seed']}, {m['operations']:,} "
                f"{plural(m['operation'])} ({m['operations_per_cycle']:.3g} per cycle); "
                f"activity of "
                f"{a['nets_evaluated']:,} of {a['nets']:,} nets evaluated from the simulation "
                f"({a['state_from_trace']} of {a['state_elements']} flip-flops and "
                f"{a['input_bits_from_trace']} of {a['input_bits']} input bits by name, "
                f"{a['state_from_netlist']} flip-flops from the netlist), "
                f"{a['nets_default_activity']} nets at the default activity.")
        for mem in b["memories"]:
            sram = mem["sram"]
            line = (f"  Memory `{mem['name']}`: {mem['depth']} x {mem['width']} bits, "
                    f"{mem['read_ports']} read / {mem['write_ports']} write ports, cut out of the "
                    f"netlist; {node} SRAM {_sram_line(sram)}")
            if "accesses" in mem:
                acc = mem["accesses"]
                line += (f"; {acc['read_bits']:,} bits read, {acc['write_bits']:,} written in the "
                         "stimulus")
                if not acc["enables_evaluated"]:
                    line += (" (an upper bound: its enables could not be evaluated, so it is "
                             "charged as accessed every cycle)")
            notes.append(line + ".")
        if b["power_measured"] and b["memories"]:
            logic, sram = s["logic_energy_per_op_j"], s["sram_energy_per_op_j"]
            bounded = s["sram_upper_bound_memories"]
            notes.append(f"  {node} energy/op = logic {format_si(logic, 'J')} + SRAM "
                         f"{format_si(sram, 'J')}"
                         + (f" (of which {format_si(s['sram_upper_bound_energy_per_op_j'], 'J')} "
                            f"upper bounds: {', '.join(bounded)})" if bounded else "")
                         + "; the 180 nm figure is logic only.")
    return "\n".join([
        "# Synthesis report",
        "",
        "Generated by `edgexpert synth --all`. Columns marked 180 nm are **measured**: Yosys on "
        f"{report['source_node']['cells']} cells at {report['source_node']['vdd_v']} V, OpenSTA "
        f"timing and power. Columns marked {node} are **scaled** from them "
        f"to {node} at {scaling['vdd_v']} V: area x{scaling['area']:.4f}, delay "
        f"x{scaling['delay']:.4f}, energy x{scaling['energy']:.4f} (Stillmaker & Baas 2017, "
        + (f"their {node} row" if len(scaling["rows"]) == 1 else
           f"interpolated geometrically between their {' and '.join(scaling['rows'])} rows, "
           f"weight {scaling['weight']:.3f} on the smaller node")
        + "".join(f"; {q} set as synth.scaling.{q}, not derived" for q in scaling.get(
            "set_in_config", ())) + f"); memories add a CACTI 7 run at {node} each "
        f"({model['cell_type']} cells, {model['temperature_k']} K; docs/synthesis.md).",
        "",
        *rows,
        "",
        "Power is OpenSTA's, from the switching activity of every net under the block's stimulus "
        "(docs/synthesis.md); energy/op = (dynamic + leakage) x clock period x cycles / "
        f"operations. The {node} area includes SRAM; the 180 nm area is logic only.",
        "",
        *notes,
        "",
        "SRAMs the cost table prices besides the blocks' memories (CACTI at "
        f"{model['technology_um']} um; read and write energy per access / port width):",
        "",
        "| SRAM | bits | port | ports | banks | area (mm2) | read | write | access | leakage |",
        "|---|---:|---:|---|---:|---:|---:|---:|---:|---:|",
        *(f"| {name} | {c['spec']['bits']:,} | {c['spec']['width_bits']} | {_ports(c['spec'])} | "
          f"{c['spec']['banks']} | {c['area_m2'] * 1e6:.4g} | "
          f"{format_si(c['read_energy_per_bit_j'], 'J')}/bit | "
          f"{format_si(c['write_energy_per_bit_j'], 'J')}/bit | "
          f"{c['access_time_s'] * 1e9:.3g} ns | {format_si(c['leakage_w'], 'W')} |"
          for name, c in report.get("sram", {}).items()),
        "",
        f"Sources: {STILLMAKER_BAAS}. {CACTI_7}, version {model['version']}, built and run on this "
        "machine (cache keys above).",
        "",
    ])


def _ports(spec: dict) -> str:
    return ", ".join(f"{spec[k]} {label}" for k, label in (
        ("rw_ports", "read-write"), ("read_ports", "read"), ("write_ports", "write")) if spec[k])
