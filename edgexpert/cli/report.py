"""`report`: one markdown page under build/report/ that gathers what the other commands measured
(synthesis, the EMA bench, the policies, the performance model, a sweep), each section with the
command that produced it, read the way a paper's evaluation section reads. The estimate is run
here (it takes a second); the rest is read from build/, and a section whose results are missing
says which command makes them."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from .common import load, settings_note, settings_options

__all__ = ["register", "write_report"]

#: what the report's estimate section shows: two full-size models and the bundled one, and the
#: policies EdgeXpert is measured against (docs/performance-model.md, "First results")
REPORT_MODELS = ("bundled", "olmoe-1b-7b", "qwen3-30b-a3b")
REPORT_POLICIES = ("ar", "naive_sd", "edgexpert", "specter", "combined")


def _read(path: Path):
    return json.loads(path.read_text()) if path.is_file() else None


def _missing(command: str) -> list[str]:
    return [f"Not measured yet: run `{command}`, then `edgexpert report`.", ""]


def _synthesis(build: Path) -> list[str]:
    out = ["## Synthesis (`edgexpert synth --all`)", ""]
    report = _read(build / "synth" / "report.json")
    if report is None:
        return out + _missing("edgexpert synth --all")
    out += ["| block | cells | area 28 nm (mm2) | fmax 28 nm (MHz) | energy/op 28 nm | operation |",
            "|---|---:|---:|---:|---:|---|"]
    for name, block in sorted(report["blocks"].items()):
        m, s = block["measured_180nm"], block["scaled_28nm"]
        energy = s.get("energy_per_op_j")
        out.append(f"| {name} | {m['cells']:,} | {s['area_mm2']:.4f} | {s['fmax_hz'] / 1e6:,.0f} | "
                   f"{'%.3g pJ' % (energy * 1e12) if energy else 'no stimulus'} | "
                   f"{s.get('operation') or m.get('operation') or ''} |")
    out += ["", "Measured at 180 nm (osu018, Yosys + OpenSTA), scaled to 28 nm "
            "(docs/synthesis.md); the full report is build/synth/report.md.", ""]
    return out + _scaling(build)


def _scaling(build: Path) -> list[str]:
    from ..synth.costs import CostTableError, load_cost_table
    from ..synth.mac_scaling import scale_to_edgexpert, scaling_table
    out = ["## Against EdgeXpert at 8K MACs (`edgexpert synth --scale`)", ""]
    try:
        result = scale_to_edgexpert(load_cost_table(build / "synth" / "costs.json"))
    except CostTableError as exc:  # the larger engine point not synthesized yet: say what to run
        return out + [f"Not measured yet: {exc}.", ""]
    return out + [scaling_table(result), ""]


def _bench(build: Path) -> list[str]:
    out = ["## EMA bus utilization (`edgexpert bench ema`)", ""]
    bench = _read(build / "bench" / "ema" / "summary.json")
    if bench is None:
        return out + _missing("edgexpert bench ema")
    latencies = sorted({lat for u in bench["utilization"].values() for lat in u}, key=int)
    out += ["| masks | " + " | ".join(f"latency {lat}" for lat in latencies) + " |",
            "|---|" + "---:|" * len(latencies)]
    for case, by_latency in bench["utilization"].items():
        out.append(f"| {case} | " + " | ".join(f"{by_latency[lat]:.4f}" for lat in latencies)
                   + " |")
    return out + ["", f"R beats per busy cycle (peak 1.0), {bench['simulator']}, seed "
                  f"{bench['seed']}.", ""]


def _measured(compare: dict | None) -> bool:
    """Whether compare.json holds results with the total-traffic columns and pass statistics."""
    return compare is not None and all("total_bytes_per_token" in m and "pass_kinds" in m
                                       for m in compare["policies"].values())


def _policies(build: Path, report_dir: Path, compare: dict | None) -> list[str]:
    out = ["## Decoding policies on the bundled model (`edgexpert compare`)", ""]
    if not _measured(compare):
        return out + _missing("edgexpert compare")
    rows = sorted(compare["policies"].items(), key=lambda kv: kv[1]["total_bytes_per_token"])
    out += ["| policy | tokens/step | passes/token | total B/token | expert | non-expert | KV | "
            "top-1 | ppl ratio |", "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for name, m in rows:
        out.append(f"| {name} | {m['tokens_per_step']:.2f} | {m['passes_per_token']:.2f} | "
                   f"{m['total_bytes_per_token']:,} | {m['expert_bytes_per_token']:,} | "
                   f"{m['nonexpert_bytes_per_token']:,} | {m['kv_bytes_per_token']:,} | "
                   f"{m['top1_agreement']:.3f} | {m['ppl_ratio']:.3f} |")
    out += ["", f"{compare['prompts']} prompts, {compare['windows']} held-out windows; every "
            "byte a decoded token reads or writes in external memory (docs/policies.md, "
            "\"Total traffic\"), fewest first."]
    plot = build / "compare" / "compare.png"
    if plot.is_file():
        shutil.copyfile(plot, report_dir / "compare.png")
        out += ["", "![total bytes per token against top-1 agreement](compare.png)"]
    return out + [""]


def _estimate(config, report_dir: Path, compare: dict | None) -> list[str]:
    from ..sim.perf.estimate import estimate
    measured = {"bundled": compare["policies"]} if _measured(compare) else None
    rows = estimate(config, list(REPORT_MODELS), list(REPORT_POLICIES), measured=measured)
    out = ["## Latency and energy per token (`edgexpert estimate`)", "",
           f"Platform: {config.platform.macs} MACs at {config.platform.clock_hz / 1e6:.0f} MHz, "
           f"{config.platform.sram_bytes // 1024} KiB SRAM, {config.platform.dram.type} "
           f"{config.platform.dram.channels} channels at {config.platform.dram.data_rate_mtps} "
           f"MT/s ({settings_note(config)}).", "",
           "| model | policy | routing | ms/token | vs naive_sd | mJ/token | vs naive_sd | "
           "DRAM / SRAM / MAC / control mJ | DRAM utilization |",
           "|---|---|---|---:|---:|---:|---:|---|---:|"]
    naive = {r["model"]: r for r in rows if r["policy"] == "naive_sd"}
    for r in rows:
        n = naive[r["model"]]
        e = r["energy_j_per_token_split"]
        out.append(
            f"| {r['model']} | {r['policy']} | {r['routing']} | "
            f"{r['latency_s_per_token'] * 1e3:.3f} | "
            f"{r['latency_s_per_token'] / n['latency_s_per_token'] - 1:+.1%} | "
            f"{r['energy_j_per_token'] * 1e3:.3f} | "
            f"{r['energy_j_per_token'] / n['energy_j_per_token'] - 1:+.1%} | "
            + " / ".join(f"{e[k] * 1e3:.2f}" for k in ("dram", "sram", "mac", "control"))
            + f" | {r['dram_utilization']:.3f} |")
    plot = _estimate_plot(rows, report_dir / "estimate.png")
    return out + ["", "Synthetic routing is labelled; the bundled model's \"trace\" rows price "
                  "the passes `edgexpert compare` measured (docs/performance-model.md).", "",
                  f"![latency and energy per token]({plot.name})", ""]


def _estimate_plot(rows: list[dict], path: Path) -> Path:
    """Latency and energy per token relative to naive_sd, grouped by model (repeatable PNG)."""
    import matplotlib
    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    models = list(dict.fromkeys(r["model"] for r in rows))
    policies = list(dict.fromkeys(r["policy"] for r in rows))
    by = {(r["model"], r["policy"]): r for r in rows}
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8), dpi=110)
    width = 0.8 / len(policies)
    for ax, key, label in ((axes[0], "latency_s_per_token", "latency per token"),
                           (axes[1], "energy_j_per_token", "energy per token")):
        for i, policy in enumerate(policies):
            ys = [by[m, policy][key] / by[m, "naive_sd"][key] for m in models]
            ax.bar([j + i * width for j in range(len(models))], ys, width, label=policy)
        ax.set_xticks([j + 0.4 - width / 2 for j in range(len(models))], models, fontsize=8)
        ax.axhline(1.0, color="grey", linewidth=0.8)
        ax.set_ylabel(f"{label} / naive_sd", fontsize=8)
        ax.grid(True, axis="y", alpha=0.3)
    axes[1].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, metadata={"Software": None})
    plt.close(fig)
    return path


def _sensitivity(config, report_dir: Path) -> list[str]:
    """Latency per token against tokens per step and the distinct-expert share, with each
    policy's break-even against plain decoding (synthetic plans; run here)."""
    from ..sim.perf.estimate import sensitivity, validation
    from .plot import sensitivity_plot
    sens = sensitivity(config, list(REPORT_MODELS), list(REPORT_POLICIES))
    out = ["## Sensitivity (`edgexpert estimate --sensitivity`)", "",
           "Break-even tokens per step against plain decoding (`ar`): below it the policy is "
           "slower than plain decoding; \"-\": not reached within the policy's draft (its depth "
           "+ 1 tokens per step). Synthetic plans (docs/performance-model.md, \"Sensitivity\").",
           "", "| model | policy | tokens/step (input) | break-even tokens/step | ms/token | "
           "ar ms/token |", "|---|---|---:|---:|---:|---:|"]
    for r in sens:
        if r["policy"] == "ar":
            continue
        be = r["break_even_tokens_per_step"]
        out.append(f"| {r['model']} | {r['policy']} | {r['tokens_per_step']:.2f} | "
                   f"{'-' if be is None else f'{be:.2f}'} | "
                   f"{r['latency_s_per_token'] * 1e3:.3f} | "
                   f"{r['ar_latency_s_per_token'] * 1e3:.3f} |")
    out += ["", "Validation of the routing model and the carried acceptance against published "
            "figures:", "", "| figure | model | published | modelled | error |",
            "|---|---|---:|---:|---:|"]
    out += [f"| {v['figure']} | {v['model']} | {v['published']:g} | {v['modelled']:.4g} | "
            f"{v['error']:+.1%} |" for v in validation(config)]
    plot = sensitivity_plot(sens, report_dir / "sensitivity.png",
                            "edgexpert estimate --sensitivity: latency per token against tokens "
                            "per step and the distinct-expert share")
    return out + ["", f"![latency per token against acceptance and expert share]({plot.name})",
                  ""]


def _sweep(build: Path, report_dir: Path) -> list[str]:
    out = ["## Sweep (`edgexpert sweep`)", ""]
    sweep = _read(build / "sweep" / "sweep.json")
    if sweep is None:
        return out + _missing("edgexpert sweep --grid platform.dram.channels=1,2,4")
    shutil.copyfile(build / "sweep" / "sweep.png", report_dir / "sweep.png")
    axes = ", ".join(f"{k} in {', '.join(v)}" for k, v in sweep["axes"].items())
    return out + [f"{axes}; {len(sweep['rows'])} rows in build/sweep/sweep.csv.", "",
                  "![latency per token over the sweep](sweep.png)", ""]


def write_report(config) -> Path:
    """build/report/report.md (and its PNGs) from the results in build/."""
    from ..support.tools import build_root
    build = build_root()
    report_dir = build / "report"
    report_dir.mkdir(parents=True, exist_ok=True)
    lines = ["# edgexpert: evaluation", "",
             "Generated by `edgexpert report` from the results under build/; each section names "
             "the command that measures it.", ""]
    compare = _read(build / "compare" / "compare.json")
    lines += _synthesis(build) + _bench(build) + _policies(build, report_dir, compare)
    lines += (_estimate(config, report_dir, compare) + _sensitivity(config, report_dir)
              + _sweep(build, report_dir))
    path = report_dir / "report.md"
    path.write_text("\n".join(lines))
    return path


def cmd_report(args) -> int:
    print(f"report {write_report(load(args))}")
    return 0


def register(sub) -> None:
    p = sub.add_parser("report", parents=[settings_options()],
                       help="one markdown page (build/report/report.md) with plots gathering "
                            "synthesis, bench, compare, estimate and sweep results")
    p.set_defaults(func=cmd_report)
