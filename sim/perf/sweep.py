"""Sweeps of the performance model over hardware points, policies and models on Dask (issue 12
item 7; docs/performance-model.md, "Sweeps").

A sweep is the cartesian product of `--grid KEY=V1,V2,...` axes (any configuration key, e.g.
`platform.dram.channels=1,2,4` or `policies.coalescing_ratio=0.5,0.75`). Every point's
configuration is built and validated here first, so a bad value stops the sweep before anything
runs; each point then runs `sim.perf.estimate.estimate` as one Dask task, on a `distributed` client:
a local cluster by default, or the scheduler the user names. Rows come back in grid order
whatever order the tasks finish in.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

from ...contracts.config import Config
from ...contracts.errors import InputError
from .estimate import check_request, estimate

__all__ = ["parse_axes", "SweepPoint", "grid_points", "run_sweep", "ROW_FIELDS"]

#: what each row of the table file holds, after the grid's own keys
ROW_FIELDS = ("model", "policy", "routing", "tokens_per_step", "latency_ms_per_token",
              "tokens_per_s", "energy_mj_per_token", "dram_mj", "sram_mj", "mac_mj", "control_mj",
              "dram_utilization", "roofline_ratio")


def parse_axes(specs: list[str]) -> dict[str, list[str]]:
    """`KEY=V1,V2,...` strings -> {key: [values]} in the order given; one line per problem."""
    axes: dict[str, list[str]] = {}
    for spec in specs:
        key, sep, values = spec.partition("=")
        key = key.strip()
        items = [v.strip() for v in values.split(",")]
        if not sep or not key or not all(items):
            raise InputError(f"--grid {spec!r} is not accepted: accepted KEY=V1,V2,... "
                             "(a configuration key and one or more comma-separated values)")
        if key in axes:
            raise InputError(f"--grid names {key} twice: accepted each key once")
        axes[key] = items
    if not axes:
        raise InputError("a sweep needs at least one --grid KEY=V1,V2,... axis")
    return axes


@dataclass(frozen=True)
class SweepPoint:
    settings: dict          # grid key -> value (as given)
    config: Config


def grid_points(axes: dict[str, list[str]], load) -> list[SweepPoint]:
    """Every combination of the axes' values, first axis slowest; `load(overrides)` builds and
    validates one configuration (the command line's own settings, then the point's)."""
    keys = list(axes)
    return [SweepPoint(dict(zip(keys, values)),
                       load([f"{k}={v}" for k, v in zip(keys, values)]))
            for values in itertools.product(*(axes[k] for k in keys))]


def _rows(point: SweepPoint, estimates: list[dict]) -> list[dict]:
    out = []
    for r in estimates:
        energy = r["energy_j_per_token_split"]
        out.append({**point.settings, "model": r["model"], "policy": r["policy"],
                    "routing": r["routing"], "tokens_per_step": r["tokens_per_step"],
                    "latency_ms_per_token": r["latency_s_per_token"] * 1e3,
                    "tokens_per_s": r["tokens_per_s"],
                    "energy_mj_per_token": r["energy_j_per_token"] * 1e3,
                    "dram_mj": energy["dram"] * 1e3, "sram_mj": energy["sram"] * 1e3,
                    "mac_mj": energy["mac"] * 1e3, "control_mj": energy["control"] * 1e3,
                    "dram_utilization": r["dram_utilization"],
                    "roofline_ratio": r["roofline_ratio"]})
    return out


def run_sweep(points: list[SweepPoint], models: list[str], policies: list[str], client,
              context: int | None = None, measured: dict | None = None,
              progress: bool = True) -> list[dict]:
    """Each point's estimate as a task on the Dask `client`; the rows, in grid order. The cost
    table (and `measured`, the bundled model's measured passes, see `estimate`) are read once
    here and shipped with the tasks, so every worker prices with the same ones whatever machine
    it runs on."""
    from distributed import as_completed

    from ...support.progress import progress_bar
    from .passes import load_cost_table
    table = load_cost_table()
    extra = {"measured": measured, **({} if context is None else {"context": context})}
    # the names once, before any task is sent (a task's own error reaches us by .result())
    check_request(models, policies, *([] if context is None else [context]))
    futures = {client.submit(estimate, p.config, models, policies, cost_table=table, pure=False,
                             **extra): i for i, p in enumerate(points)}
    results: dict[int, list[dict]] = {}
    bar = progress_bar(total=len(points), unit="point", desc="sweep", enabled=progress)
    for future in as_completed(futures):
        results[futures[future]] = future.result()
        bar.update()
    bar.close()
    return [row for i, p in enumerate(points) for row in _rows(p, results[i])]
