"""`report`: one markdown page under build/report/ that gathers what the other commands measured
(synthesis, the EMA, DCU and top benches, the calibration, the policies, the performance model,
a sweep), read the way a paper's evaluation section reads. Each section says where its numbers
came from: the command, settings, `--quick` or not, time and commit of the run that wrote them
(the record beside each result, support/provenance.py). The estimate and the calibration are run
here (seconds); the rest is read from build/, and a section whose results are missing says which
command makes them."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from ..contracts.errors import InputError
from ..support.provenance import describe
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


def _section(title: str, path: Path, command: str) -> tuple[list[str], dict | None]:
    """A section's heading and the result at `path` it shows; when there is none, the
    heading followed by the `command` that makes it, and None."""
    data = _read(path)
    return [f"## {title}", ""] + (_missing(command) if data is None else []), data


def _synthesis(build: Path) -> list[str]:
    out, report = _section("Synthesis (`edgexpert synth --all`)",
                           build / "synth" / "report.json", "edgexpert synth --all")
    if report is None:
        return out
    node = f"{report['scaling']['node_nm']} nm"
    out += [f"| block | cells | area {node} (mm2) | fmax {node} (MHz) | energy/op {node} | "
            "operation |", "|---|---:|---:|---:|---:|---|"]
    for name, block in sorted(report["blocks"].items()):
        m, s = block["measured_180nm"], block["scaled"]
        energy = s.get("energy_per_op_j")
        out.append(f"| {name} | {m['cells']:,} | {s['area_mm2']:.4f} | {s['fmax_hz'] / 1e6:,.0f} | "
                   f"{'%.3g pJ' % (energy * 1e12) if energy else 'no stimulus'} | "
                   f"{s.get('operation') or m.get('operation') or ''} |")
    out += ["", f"Measured at 180 nm (osu018, Yosys + OpenSTA), scaled to {node} "
            "(docs/synthesis.md); the full report is build/synth/report.md.", "",
            describe(build / "synth" / "report.json"), ""]
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
    path = build / "bench" / "ema" / "summary.json"
    out, bench = _section("EMA bus utilization (`edgexpert bench ema`)", path,
                          "edgexpert bench ema")
    if bench is None:
        return out
    latencies = sorted({lat for u in bench["utilization"].values() for lat in u}, key=int)
    out += ["| masks | " + " | ".join(f"latency {lat}" for lat in latencies) + " |",
            "|---|" + "---:|" * len(latencies)]
    for case, by_latency in bench["utilization"].items():
        out.append(f"| {case} | " + " | ".join(f"{by_latency[lat]:.4f}" for lat in latencies)
                   + " |")
    return out + ["", f"R beats per busy cycle (peak 1.0), {bench['simulator']}, seed "
                  f"{bench['seed']}.", "", describe(path), ""]


def _top(build: Path, report_dir: Path) -> list[str]:
    """The accelerator top's whole decode step and prefill chunk on each memory benched, then
    each user's step (`bench top --prompt | --trace`, in folders below build/bench/top/); each
    with its timeline (`_timeline`)."""
    out = ["## The accelerator top (`edgexpert bench top`)", ""]
    folder = build / "bench" / "top"
    paths = sorted(folder.glob("summary*.json")) + sorted(folder.glob("*/*/summary*.json"))
    summaries = [(p, s) for p in paths if (s := _read(p)) is not None and "runs" in s]
    if not summaries:
        return out + _missing("edgexpert bench top --quick")
    for path, summary in summaries:
        memory = summary["memory"]["memory"]
        vectors = summary.get("vectors")
        step = ("the bundled step" if vectors is None else
                f"prompt {vectors['prompt']!r}" if "prompt" in vectors else
                f"trace {Path(vectors['trace']).name}, step {vectors['step']}")
        out += [f"### {step}, {memory} memory, hardware {summary['hardware']}", "",
                "| masks/pauses | cycles | AXI beats | cycles per beat | MACs/cycle | "
                "share of peak | memory wait |", "|---|---:|---:|---:|---:|---:|---:|"]
        for name, run in summary["runs"].items():
            out.append(f"| {name} | {run['cycles']:,} | {run['beats']:,} | "
                       f"{run['cycles_per_beat']:.3f} | {run['macs_per_cycle']:.1f} | "
                       f"{run['peak_share']:.1%} | {run['memory_wait'] / run['cycles']:.1%} |")
        for mode, run in (summary.get("prefill") or {}).items():
            out += ["", f"Prefill chunk ({run['tokens']} tokens, pauses {mode}): "
                    f"{run['cycles_per_layer']:,.0f} cycles per chunk-layer, "
                    f"{run['macs_per_cycle']:.1f} MACs per busy cycle, "
                    f"{run['experts_per_layer']:.1f} experts fetched per layer."]
        out += ["", "Every output compared with the golden model's, bit for bit; cycles per "
                "beat is 1 at the bus's roofline (docs/blocks/top.md, \"Cycle file\"). Seed "
                f"{summary['seed']}.", "", describe(path), ""]
        out += _timeline(folder, path, report_dir)
    return out


def _timeline(folder: Path, summary: Path, report_dir: Path) -> list[str]:
    """Where the step's cycles went, from the cycle file beside `summary` (cycles.json beside
    summary.json, cycles-M.json beside summary-M.json, as `bench top` writes them): a line per
    run with its split, per run and pass kind the split's sums and shares, and the timeline
    plot (`timeline_plot`), named after the cycle file's place under `folder`."""
    from ..contracts.cycles import SPLIT_PARTS, split_by_kind
    from .plot import timeline_plot
    path = summary.with_name(summary.name.replace("summary", "cycles", 1))
    rel = path.relative_to(folder)
    cycles = _read(path)
    runs = {} if cycles is None else {n: r for n, r in cycles["runs"].items() if "layers" in r}
    if not runs:
        return [f"No timeline: build/bench/top/{rel} has no layer timeline "
                "(written before bench top recorded one, or missing); rerun `edgexpert bench "
                "top` for it.", ""]
    out = ["Where the layers' cycles went, from each layer's first command to its last MoE sum: "
           "head before its first AXI beat, bus with a beat, gaps between beats without one, "
           "tail after its last beat (docs/blocks/top.md, \"Cycle file\").", ""]
    for name, run in runs.items():
        shares, span = run["split"]["shares"], run["split"]["span"]
        # the top's counters over the same layers (the engine's since it was recorded)
        counters = "".join(f"; {label} {sum(e[k] for e in run['layers']) / span:.1%}"
                           for k, label in (("compute", "engine computing"),
                                            ("memory_wait", "memory wait"))
                           if all(k in e for e in run["layers"]))
        out.append(f"- {name}: " + ", ".join(f"{k} {shares[k]:.1%}" for k in SPLIT_PARTS)
                   + f" of {span:,} cycles{counters}; {run['cycles_per_beat']:.3f} "
                   "cycles per beat")
    out += ["", "| run | kind | layers | " + " | ".join(SPLIT_PARTS) + " | "
            + " | ".join(f"{k} share" for k in SPLIT_PARTS) + " |",
            "|---|---|" + "---:|" * (1 + 2 * len(SPLIT_PARTS))]
    for name, run in runs.items():
        for kind, s in split_by_kind(run["layers"]).items():
            out.append(f"| {name} | {kind} | {s['layers']} | "
                       + " | ".join(f"{s[k]:,}" for k in SPLIT_PARTS) + " | "
                       + " | ".join(f"{s['shares'][k]:.1%}" for k in SPLIT_PARTS) + " |")
    stem = "-".join(filter(None, ["timeline", *rel.parent.parts,
                                  rel.stem.removeprefix("cycles").lstrip("-")]))
    plot = timeline_plot(runs, report_dir / f"{stem}.png",
                         f"edgexpert bench top: AXI beats per cycle, each layer's head and "
                         f"tail, engine computing and memory wait, {rel}")
    return out + ["", f"![the step's timeline, {rel}]({plot.name})", ""]


def _dcu(build: Path) -> list[str]:
    """The DCU's cycles per depth group against the EMA's fetch of the same group."""
    path = build / "bench" / "dcu" / "summary.json"
    out, bench = _section("The depth coalescing unit (`edgexpert bench dcu`)", path,
                          "edgexpert bench dcu")
    if bench is None:
        return out
    out += ["| matrix/n | jobs | DCU cycles (mean) | worst | EMA beats (mean) | "
            "after de-duplication | DCU / EMA |", "|---|---:|---:|---:|---:|---:|---:|"]
    for key, row in bench["by_group"].items():
        out.append(f"| {key} | {row['jobs']} | {row['dcu_cycles_mean']:.1f} | "
                   f"{row['dcu_cycles_worst']} | {row['ema_beats_mean']:.1f} | "
                   f"{row['ema_beats_dedup_mean']:.1f} | {row['dcu_over_ema']:.2f} |")
    return out + ["", f"All groups: DCU {bench['total_dcu_cycles']:,} cycles against "
                  f"{bench['total_ema_beats']:,} EMA beats ({bench['total_ema_beats_dedup']:,} "
                  f"after de-duplication); below 1 the DCU's choice hides behind the fetch. "
                  f"{bench['simulator']}, seed {bench['seed']}, hardware {bench['hardware']}.",
                  "", describe(path), ""]


def _calibration(config) -> list[str]:
    """The performance model against the RTL benches (`estimate --calibrate`, run here on the
    bench results build/ holds), one row per comparison and run."""
    from .calibration import calibration, calibration_files
    out = ["## The model against the RTL (`edgexpert estimate --calibrate`)", ""]
    files = calibration_files()
    if not files:
        return out + _missing("edgexpert bench ema` and `edgexpert bench top")
    try:
        _, results, notes = calibration(config, show=False)
    except InputError as exc:   # a stale or foreign file: the section says which, the rest stands
        return out + [f"Not compared: {exc}.", ""]
    out += ["| comparison | run | RTL cycles | model cycles | error |", "|---|---|---:|---:|---:|"]
    for name, result in results.items():
        for run, r in result["runs"].items():
            rtl = r["rtl_cycles"] if name.startswith("ema") else r["cycles"]
            # the compute model's error at the model's utilization (its other column refits it)
            error = r["model_error"] if name == "top" else r["error"]
            out.append(f"| {_comparison(name)} | {run} | {rtl:,} | {r['model_cycles']:,} | "
                       f"{error:+.1%} |")
        # a DRAM memory's prefill chunk, priced by the pass model as its decode passes are
        # (the latency memory's `top` prices its chunk by compute alone, per chunk-layer)
        dram_prefill = result.get("prefill", {}) if name.startswith("top_") else {}
        for mode, chunk in dram_prefill.items():
            out.append(f"| {_comparison(name)} | prefill/{mode} | {chunk['busy']:,} | "
                       f"{chunk['model_cycles']:,} | {chunk['error']:+.1%} |")
    tolerance = next((r["tolerance"] for n, r in results.items() if n.startswith("ema")), None)
    out += ["", "Errors are model / RTL - 1"
            + ("" if tolerance is None else
               f"; the EMA cycle model is held to {tolerance:.0%} per run")
            + "; the compute and pass models are reported, not held to a tolerance "
              "(docs/performance-model.md)."]
    out += [f"Not compared: {note}." for note in notes]
    out += [""] + [f"- `{name}`: {describe(path)}" for name, path in files.items()]
    return out + ["", f"Compared here by `edgexpert report` ({settings_note(config)}).", ""]


def _comparison(name: str) -> str:
    """What a calibration entry (cli/estimate.py `calibration`) compares."""
    kind, _, memory = name.partition("_")
    on = f" --memory {memory}" if memory else ""
    if kind == "ema":
        return f"EMA cycle model vs `bench ema{on}`"
    return f"{'pass' if memory else 'compute'} model vs `bench top{on}`"


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
            "\"Total traffic\"), fewest first.", "", describe(build / "compare" / "compare.json")]
    plot = build / "compare" / "compare.png"
    if plot.is_file():
        shutil.copyfile(plot, report_dir / "compare.png")
        out += ["", "![total bytes per token against top-1 agreement](compare.png)"]
    return out + [""]


def _estimate(config, build: Path, report_dir: Path, compare: dict | None) -> list[str]:
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
    source = (describe(build / "compare" / "compare.json") if measured else
              "none, every row is synthetic.")
    return out + ["", "Synthetic routing is labelled (and hatched in the plot); the bundled "
                  "model's \"trace\" rows price the passes `edgexpert compare` measured "
                  "(docs/performance-model.md).", "",
                  f"Estimated here by `edgexpert report` ({settings_note(config)}); measured "
                  f"passes: {source}", "", f"![latency and energy per token]({plot.name})", ""]


def _estimate_plot(rows: list[dict], path: Path) -> Path:
    """Latency and energy per token relative to naive_sd, grouped by model, a colour per
    policy; bars priced from synthetic routing hatched, from measured passes solid; the legend
    below the panels, clear of the bars (repeatable PNG)."""
    import matplotlib
    matplotlib.use("Agg")
    from matplotlib import pyplot as plt
    from matplotlib.patches import Patch

    models = list(dict.fromkeys(r["model"] for r in rows))
    policies = list(dict.fromkeys(r["policy"] for r in rows))
    colours = dict(zip(policies, plt.rcParams["axes.prop_cycle"].by_key()["color"]))
    by = {(r["model"], r["policy"]): r for r in rows}
    fig, axes = plt.subplots(1, 2, figsize=(10, 4.4), dpi=110)
    width = 0.8 / len(policies)
    for ax, key, label in ((axes[0], "latency_s_per_token", "latency per token"),
                           (axes[1], "energy_j_per_token", "energy per token")):
        for i, policy in enumerate(policies):
            for j, m in enumerate(models):
                r = by[m, policy]
                synthetic = r["routing"] != "trace"
                ax.bar(j + i * width, r[key] / by[m, "naive_sd"][key], width,
                       color=colours[policy], hatch="///" if synthetic else None,
                       edgecolor="white" if synthetic else colours[policy], linewidth=0)
        ax.set_xticks([j + 0.4 - width / 2 for j in range(len(models))], models, fontsize=8)
        ax.axhline(1.0, color="grey", linewidth=0.8)
        ax.set_ylabel(f"{label} / naive_sd", fontsize=8)
        ax.set_title(f"{label}, relative to naive_sd", fontsize=9)
        ax.grid(True, axis="y", alpha=0.3)
    handles = [Patch(color=colours[p], label=p) for p in policies]
    handles += [Patch(facecolor="grey", label="measured passes (trace)"),
                Patch(facecolor="grey", hatch="///", edgecolor="white",
                      label="synthetic routing")]
    fig.legend(handles=handles, loc="lower center", ncol=len(handles), fontsize=7,
               frameon=False)
    fig.suptitle("edgexpert estimate: latency and energy per token by model and policy",
                 fontsize=9)
    fig.tight_layout(rect=(0, 0.07, 1, 1))
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
    out, sweep = _section("Sweep (`edgexpert sweep`)", build / "sweep" / "sweep.json",
                          "edgexpert sweep --grid platform.dram.channels=1,2,4")
    if sweep is None:
        return out
    shutil.copyfile(build / "sweep" / "sweep.png", report_dir / "sweep.png")
    axes = ", ".join(f"{k} in {', '.join(v)}" for k, v in sweep["axes"].items())
    paired = sweep.get("paired") or {}
    if paired:
        axes = ", ".join(filter(None, [axes, " with ".join(
            f"{k} in {', '.join(v)}" for k, v in paired.items()) + " (paired)"]))
    return out + [f"{axes}; {len(sweep['rows'])} rows in build/sweep/sweep.csv.", "",
                  describe(build / "sweep" / "sweep.json"), "",
                  "![latency and energy per token over the sweep](sweep.png)", ""]


def write_report(config) -> Path:
    """build/report/report.md (and its PNGs) from the results in build/."""
    from ..support.tools import build_root
    build = build_root()
    report_dir = build / "report"
    report_dir.mkdir(parents=True, exist_ok=True)
    lines = ["# edgexpert: evaluation", "",
             "Generated by `edgexpert report` from the results under build/; each section names "
             "the command that measures it and the run its numbers come from (command, "
             "settings, --quick or not, time, commit).", ""]
    compare = _read(build / "compare" / "compare.json")
    lines += (_synthesis(build) + _bench(build) + _dcu(build) + _top(build, report_dir)
              + _calibration(config) + _policies(build, report_dir, compare))
    lines += (_estimate(config, build, report_dir, compare) + _sensitivity(config, report_dir)
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
                            "synthesis, the EMA, DCU and top benches, the calibration, compare, "
                            "estimate and sweep results, each with the run it came from")
    p.set_defaults(func=cmd_report)
