"""Plots of the policy studies and the performance model: total bytes per decoded token against
quality, a sweep, the estimate's sensitivity; and of the top bench: a step's timeline."""

from __future__ import annotations

import math
import textwrap
from pathlib import Path

__all__ = ["tradeoff_plot", "sweep_plot", "sensitivity_plot", "timeline_plot"]


def tradeoff_plot(results: dict[str, dict], path: Path, title: str) -> Path:
    """One labelled point per policy or setting: every byte a decoded token reads or writes in
    external memory (x: experts, non-expert weights, KV cache; sim/perf/traffic.py) against top-1
    agreement with the exact model (y). Written as PNG without a timestamp or version, so the
    same results give the same file."""
    import matplotlib
    matplotlib.use("Agg")      # no display on CI machines
    from matplotlib import pyplot as plt

    fig, ax = plt.subplots(figsize=(7.5, 5), dpi=120)
    for i, (label, m) in enumerate(results.items()):
        x, y = m["total_bytes_per_token"] / 1000, m["top1_agreement"]
        ax.scatter([x], [y], s=28)
        # labels alternate above and below their points, so that neighbours stay readable
        ax.annotate(label, (x, y), textcoords="offset points", xytext=(4, 4 if i % 2 else -10),
                    fontsize=7)
    ax.set_xlabel("total external-memory bytes per decoded token (kB)")
    ax.set_ylabel("top-1 agreement with the exact model")
    ax.set_title(textwrap.fill(title, 100), fontsize=8)
    ax.grid(True, alpha=0.3)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, metadata={"Software": None})
    plt.close(fig)
    return path


def sweep_plot(rows: list[dict], axis: list[str], path: Path, title: str) -> Path:
    """Latency (top row) and energy (bottom row) per generated token against the sweep's first
    axis (`axis`: its key, or the keys of paired axes that move together, ticks labelled
    with their values joined by "/"), a column per model; a line per policy and point of the other axes. Each policy keeps
    its marker and line style, each point of the other axes its colour; each line is shifted
    sideways by a small step and its hollow markers are smaller than the line's before, so
    lines that coincide (a setting that does not move a policy) stay visible side by side.
    The legend sits below the panels. Repeatable PNG, as `tradeoff_plot`."""
    import matplotlib
    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    models = list(dict.fromkeys(r["model"] for r in rows))
    others = [k for k in rows[0] if k not in axis and k not in _SWEEP_RESULT_KEYS]
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    points = list(dict.fromkeys(tuple(r[k] for k in others) for r in rows))

    def tick(r: dict) -> str:
        return "/".join(str(r[k]) for k in axis)

    ticks = list(dict.fromkeys(tick(r) for r in rows))
    # wide enough for two legend entries even with one model's column
    width = max(4.5 * len(models), 9.0)
    fig, axes = plt.subplots(2, len(models), figsize=(width, 7), dpi=110, squeeze=False)
    handles = {}
    for column, model in enumerate(models):
        lines: dict[tuple, tuple[list, list, list]] = {}
        for r in rows:
            if r["model"] == model:
                xs, lat, energy = lines.setdefault((r["policy"], tuple(r[k] for k in others)),
                                                   ([], [], []))
                xs.append(ticks.index(tick(r)))
                lat.append(r["latency_ms_per_token"])
                energy.append(r["energy_mj_per_token"])
        for i, ((policy, point), (xs, lat, energy)) in enumerate(lines.items()):
            marker, style = _LOOKS.get(policy, ("o", "-"))
            # a twentieth of a tick per line, centred: coinciding lines sit side by side
            xs = [x + 0.05 * (i - (len(lines) - 1) / 2) for x in xs]
            label = ", ".join([policy] + [f"{k}={v}" for k, v in zip(others, point)])
            look = {"marker": marker, "linestyle": style, "linewidth": 1,
                    "color": colours[points.index(point) % len(colours)],
                    "markerfacecolor": "none", "markersize": max(9 - 1.5 * i, 3)}
            line, = axes[0][column].plot(xs, lat, **look)
            axes[1][column].plot(xs, energy, **look)
            handles.setdefault(label, line)
        for row, what in ((0, "latency per generated token (ms)"),
                          (1, "energy per generated token (mJ)")):
            panel = axes[row][column]
            panel.set_title(f"{model}: {what.split(' (')[0]}", fontsize=9)
            panel.set_xticks(range(len(ticks)), ticks)
            panel.set_xlabel(" / ".join(axis), fontsize=8)
            panel.set_ylabel(what, fontsize=8)
            panel.grid(True, alpha=0.3)
            panel.tick_params(labelsize=7)
    # an entry is up to about 4.5 inches of 7-point text
    ncol = max(1, min(len(handles), int(width // 4.5)))
    fig.legend(list(handles.values()), list(handles), loc="lower center", ncol=ncol,
               fontsize=7, frameon=False)
    fig.suptitle(textwrap.fill(title, int(width * 12)), fontsize=9)
    legend_rows = -(-len(handles) // ncol)
    fig.tight_layout(rect=(0, min(0.03 * legend_rows, 0.3), 1, 0.97))
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, metadata={"Software": None})
    plt.close(fig)
    return path


#: the keys of a sweep row that are results, not grid settings (sim/perf/sweep.py ROW_FIELDS)
_SWEEP_RESULT_KEYS = ("model", "policy", "routing", "tokens_per_step", "latency_ms_per_token",
                      "tokens_per_s", "energy_mj_per_token", "dram_mj", "sram_mj", "mac_mj",
                      "control_mj", "dram_utilization", "roofline_ratio")


#: one look per policy (marker, line style), so that lines that coincide stay told apart
_LOOKS = {"naive_sd": ("o", "-"), "edgexpert": ("s", "--"), "moe_spec": ("^", "-."),
          "s2moe": ("v", ":"), "specmoe": ("P", "-"), "specter": ("D", "--"),
          "combined": ("X", "-.")}


def sensitivity_plot(sens: list[dict], path: Path, title: str) -> Path:
    """The estimate's sensitivity (sim.perf.estimate.sensitivity): a row of two panels per
    model, latency per token against tokens per step (left; each policy's break-even against
    plain decoding marked on the dashed `ar` line) and against the share of a layer's experts
    the step's target pass activates (right); one line per speculative policy, each with its
    own marker and line style; the legend below the panels. Repeatable PNG, as
    `tradeoff_plot`."""
    import matplotlib
    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    models = list(dict.fromkeys(r["model"] for r in sens))
    fig, axes = plt.subplots(len(models), 2, figsize=(10, 3.2 * len(models)), dpi=110,
                             squeeze=False)
    handles = {}
    for (left, right), model in zip(axes, models):
        rows = [r for r in sens if r["model"] == model]
        plain = rows[0]["ar_latency_s_per_token"] * 1e3
        for panel in (left, right):
            line = panel.axhline(plain, color="black", linestyle=(0, (4, 3)), linewidth=1)
            handles.setdefault("ar (plain decoding)", line)
        for r in rows:
            if not r["by_acceptance"]:
                continue
            marker, style = _LOOKS.get(r["policy"], ("o", "-"))
            xs = [p["tokens_per_step"] for p in r["by_acceptance"]]
            ys = [p["latency_s_per_token"] * 1e3 for p in r["by_acceptance"]]
            line, = left.plot(xs, ys, marker=marker, linestyle=style, markersize=4)
            handles.setdefault(r["policy"], line)
            be = r["break_even_tokens_per_step"]
            if be is not None:
                left.plot([be], [plain], marker=marker, markersize=8, color=line.get_color(),
                          markerfacecolor="none", linestyle="none")
            right.plot([p["share"] for p in r["by_share"]],
                       [p["latency_s_per_token"] * 1e3 for p in r["by_share"]], marker=marker,
                       linestyle=style, markersize=4, color=line.get_color())
        left.set_title(f"{model}: against tokens per step (open marks: break-even)", fontsize=8)
        right.set_title(f"{model}: against the distinct-expert share", fontsize=8)
        left.set_xlabel("tokens per step (accepted + bonus)", fontsize=8)
        right.set_xlabel("share of a layer's experts the verification activates", fontsize=8)
        for panel in (left, right):
            panel.set_ylabel("ms per generated token", fontsize=8)
            panel.grid(True, alpha=0.3)
            panel.tick_params(labelsize=7)
    fig.legend(list(handles.values()), list(handles), loc="lower center",
               ncol=min(len(handles), 8), fontsize=7, frameon=False)
    fig.suptitle(textwrap.fill(title, 120), fontsize=9)
    fig.tight_layout(rect=(0, 0.04, 1, 0.97))
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, metadata={"Software": None})
    plt.close(fig)
    return path


#: the timeline's colours: the phases a layer waits in, the pass kinds, and the top's counters
#: per layer (the engine computing, the feeder waiting on memory)
_PHASE_COLOURS = {"head": "tab:orange", "tail": "tab:red"}
_KIND_COLOURS = {"draft": "tab:green", "verify": "tab:purple"}
_COUNTER_LINES = {"compute": ("tab:olive", "-", "engine computing, share of the layer"),
                  "memory_wait": ("tab:brown", (0, (1, 1.5)), "memory wait, share of the layer")}


def timeline_plot(runs: dict[str, dict], path: Path, title: str) -> Path:
    """A step's timeline per run of a `bench top` cycle file (runs with `layers`, a panel each,
    stacked on one time axis from the first layer's first command): AXI beats per cycle in
    each bin (1.0 is the bus's roofline), each layer's head (before its first beat: commands,
    descriptors and the memory's latency, the engine waiting) and tail (after its last beat: the
    engine finishing, the bus idle) shaded, per layer the share of its cycles the engine
    computed and the feeder waited on memory (the top's COMPUTE and MEMORY_WAIT counters; the
    engine's line only in files since it was recorded), and a band above with each pass
    coloured by kind, labelled where it is wide enough. Each panel's title gives the run's split
    (docs/blocks/top.md, "Cycle file") and cycles per beat. A fixed width and a fixed height per
    panel; repeatable PNG, as `tradeoff_plot`."""
    import matplotlib
    matplotlib.use("Agg")
    from matplotlib import pyplot as plt
    from matplotlib.patches import Patch
    from matplotlib.ticker import StrMethodFormatter

    fig, axes = plt.subplots(len(runs), 1, figsize=(11, 1.2 + 1.9 * len(runs)), dpi=110,
                             sharex=True, squeeze=False)
    # the x axis ends with the longest run, so that runs compare at one scale
    origins = {name: run["layers"][0]["start"] for name, run in runs.items()}
    length = max(run["layers"][-1]["end"] - origins[name] for name, run in runs.items())
    for ax, (name, run) in zip(axes[:, 0], runs.items()):
        origin, bins = origins[name], run["beats_per_bin"]
        width = bins["bin_cycles"]
        ax.stairs([b / width for b in bins["beats"]],
                  [i * width for i in range(len(bins["beats"]) + 1)], color="tab:blue",
                  linewidth=0.8)
        ax.axhline(1.0, color="black", linestyle=(0, (4, 3)), linewidth=0.8)
        for e in run["layers"]:
            start, end = e["start"] - origin, e["end"] - origin
            # below the roofline only: the band above it belongs to the passes
            ax.axvspan(start, start + e["head"], ymax=0.72, color=_PHASE_COLOURS["head"],
                       alpha=0.35, linewidth=0)
            ax.axvspan(end - e["tail"], end, ymax=0.72, color=_PHASE_COLOURS["tail"],
                       alpha=0.35, linewidth=0)
        for key, (colour, style, _) in _COUNTER_LINES.items():
            layers = [e for e in run["layers"] if key in e]
            if layers:
                # a layer's share drawn over its span; NaN breaks the line between layers
                xs = [x for e in layers for x in (e["start"] - origin, e["end"] - origin, math.nan)]
                ys = [y for e in layers
                      for y in (*[e[key] / (e["end"] - e["start"])] * 2, math.nan)]
                ax.plot(xs, ys, color=colour, linestyle=style, linewidth=1.1)
        for (start, end), kind in _passes(run["layers"], origin):
            # white edges: consecutive passes of a kind stay apart
            ax.axvspan(start, end, ymin=0.78, ymax=0.95, alpha=0.6, edgecolor="white",
                       facecolor=_KIND_COLOURS.get(kind, "grey"), linewidth=1)
            if end - start >= 0.04 * length:
                ax.text((start + end) / 2, 1.21, kind, ha="center", va="center", fontsize=6)
        shares = run["split"]["shares"]
        ax.set_title(f"{name}: head {shares['head']:.1%}, bus {shares['bus']:.1%}, gaps "
                     f"{shares['gaps']:.1%}, tail {shares['tail']:.1%} of "
                     f"{run['split']['span']:,} layer cycles; {run['cycles_per_beat']:.3f} "
                     "cycles per beat", fontsize=8)
        # 1.4: room above the roofline for the pass band
        ax.set_ylim(0, 1.4)
        ax.set_yticks([0, 0.5, 1.0])
        ax.set_ylabel("beats/cycle; share", fontsize=8)
        ax.grid(True, axis="y", alpha=0.3)
        ax.tick_params(labelsize=7)
    axes[-1, 0].set_xlim(0, length)
    axes[-1, 0].xaxis.set_major_formatter(StrMethodFormatter("{x:,.0f}"))
    axes[-1, 0].set_xlabel("cycles from the first layer's first command (beats counted in "
                           f"bins of {width:,} cycles)", fontsize=8)
    handles = [plt.Line2D([], [], color="tab:blue", linewidth=0.8, label="AXI beats per cycle"),
               plt.Line2D([], [], color="black", linestyle=(0, (4, 3)), linewidth=0.8,
                          label="bus roofline (1 beat per cycle)"),
               Patch(color=_PHASE_COLOURS["head"], alpha=0.35,
                     label="head: before the layer's first beat"),
               Patch(color=_PHASE_COLOURS["tail"], alpha=0.35,
                     label="tail: after the layer's last beat")]
    handles += [plt.Line2D([], [], color=colour, linestyle=style, linewidth=1.1, label=label)
                for colour, style, label in _COUNTER_LINES.values()]
    handles += [Patch(color=colour, alpha=0.6, label=f"{kind} pass")
                for kind, colour in _KIND_COLOURS.items()]
    fig.legend(handles=handles, loc="lower center", ncol=4, fontsize=7, frameon=False)
    fig.suptitle(textwrap.fill(title, 130), fontsize=9)
    # the legend's two rows take half an inch at the bottom whatever the number of panels
    fig.tight_layout(rect=(0, 0.5 / fig.get_figheight(), 1, 0.97))
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, metadata={"Software": None})
    plt.close(fig)
    return path


def _passes(layers: list[dict], origin: int) -> list[tuple[tuple[int, int], str]]:
    """Each pass's span (its first layer's start to its last layer's end, from `origin`) and
    kind, in order: the layers of a pass are consecutive."""
    out: dict[tuple, list] = {}
    for e in layers:
        span = out.setdefault((e["prompt"], e["index"]), [e["start"], e["end"], e["kind"]])
        span[1] = e["end"]
    return [((start - origin, end - origin), kind) for start, end, kind in out.values()]
