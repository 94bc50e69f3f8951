"""Plots of the policy studies and the performance model: total bytes per decoded token against
quality, a sweep, the estimate's sensitivity."""

from __future__ import annotations

import textwrap
from pathlib import Path

__all__ = ["tradeoff_plot", "sweep_plot", "sensitivity_plot"]


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


def sweep_plot(rows: list[dict], axis: str, path: Path, title: str) -> Path:
    """Latency per generated token against the sweep's first axis: one panel per model, one
    line per policy (the other axes' points drawn as separate lines, labelled by their
    values). Repeatable PNG, as `tradeoff_plot`."""
    import matplotlib
    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    models = list(dict.fromkeys(r["model"] for r in rows))
    others = [k for k in rows[0] if k != axis and k not in _SWEEP_RESULT_KEYS]
    fig, axes = plt.subplots(1, len(models), figsize=(4.5 * len(models), 4), dpi=110,
                             squeeze=False)
    for panel, model in zip(axes[0], models):
        lines: dict[str, tuple[list, list]] = {}
        for r in rows:
            if r["model"] != model:
                continue
            label = ", ".join([r["policy"]] + [f"{k}={r[k]}" for k in others])
            xs, ys = lines.setdefault(label, ([], []))
            xs.append(str(r[axis]))
            ys.append(r["latency_ms_per_token"])
        for label, (xs, ys) in lines.items():
            panel.plot(xs, ys, marker="o", markersize=3, label=label)
        panel.set_title(model, fontsize=9)
        panel.set_xlabel(axis, fontsize=8)
        panel.set_ylabel("latency per generated token (ms)", fontsize=8)
        panel.grid(True, alpha=0.3)
    axes[0][-1].legend(fontsize=6, loc="best")
    fig.suptitle(textwrap.fill(title, 120), fontsize=9)
    fig.tight_layout()
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
