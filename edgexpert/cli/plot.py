"""Trade-off plots of the policy studies: total bytes per decoded token against quality."""

from __future__ import annotations

import textwrap
from pathlib import Path

__all__ = ["tradeoff_plot"]


def tradeoff_plot(results: dict[str, dict], path: Path, title: str) -> Path:
    """One labelled point per policy or setting: every byte a decoded token reads or writes in
    external memory (x: experts, non-expert weights, KV cache; sim/traffic.py) against top-1
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
