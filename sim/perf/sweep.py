"""Sweeps of the performance model over hardware points, policies and models on Dask (issue 12
item 7; docs/performance-model.md, "Sweeps").

A sweep is the cartesian product of `--grid KEY=V1,V2,...` axes (any configuration key, e.g.
`platform.dram.channels=1,2,4` or `policies.coalescing_ratio=0.5,0.75`) and, when given, one
more axis of `--paired KEY=V1,V2,...` keys that move together (`platform.dram.type=LPDDR4X,LPDDR5`
with `platform.dram.data_rate_mtps=4266,6400`: two points, not four). Every point's
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

__all__ = ["parse_axes", "parse_paired", "SweepPoint", "grid_points", "run_sweep", "ROW_FIELDS"]

#: what each row of the table file holds, after the grid's own keys
ROW_FIELDS = ("model", "policy", "routing", "tokens_per_step", "latency_ms_per_token",
              "tokens_per_s", "energy_mj_per_token", "dram_mj", "sram_mj", "mac_mj", "control_mj",
              "dram_utilization", "roofline_ratio")


def parse_axes(specs: list[str], flag: str = "--grid", required: bool = True
               ) -> dict[str, list[str]]:
    """`KEY=V1,V2,...` strings of `flag` -> {key: [values]} in the order given; one line per
    problem (none given is one when `required`)."""
    axes: dict[str, list[str]] = {}
    for spec in specs:
        key, sep, values = spec.partition("=")
        key = key.strip()
        items = [v.strip() for v in values.split(",")]
        if not sep or not key or not all(items):
            raise InputError(f"{flag} {spec!r} is not accepted: accepted KEY=V1,V2,... "
                             "(a configuration key and one or more comma-separated values)")
        if key in axes:
            raise InputError(f"{flag} names {key} twice: accepted each key once")
        axes[key] = items
    if required and not axes:
        raise InputError("a sweep needs at least one --grid KEY=V1,V2,... axis (or --paired "
                         "axes)")
    return axes


def parse_paired(specs: list[str], grid: dict[str, list[str]]) -> dict[str, list[str]]:
    """The `--paired KEY=V1,V2,...` axes: they move together, the i-th value of each with the
    i-th of the others (LPDDR4X at 4266 with LPDDR5 at 6400), as one axis of the grid beside
    the `--grid` ones. One line per problem: values of unequal count, a key also in `grid`."""
    paired = parse_axes(specs, "--paired", required=False)
    counts = {key: len(values) for key, values in paired.items()}
    if len(set(counts.values())) > 1:
        raise InputError("--paired axes move together, so each needs as many values: got "
                         + ", ".join(f"{k} {n}" for k, n in counts.items())
                         + "; accepted the same count on every --paired KEY")
    both = [key for key in paired if key in grid]
    if both:
        raise InputError(f"{both[0]} is both a --grid and a --paired axis: accepted each key "
                         "once")
    return paired


@dataclass(frozen=True)
class SweepPoint:
    settings: dict          # grid key -> value (as given)
    config: Config


def grid_points(axes: dict[str, list[str]], load, paired: dict[str, list[str]] | None = None
                ) -> list[SweepPoint]:
    """Every combination of the axes' values, first axis slowest, the `paired` axes (if any)
    one more axis after them whose i-th point sets the i-th value of each; `load(overrides)`
    builds and validates one configuration (the command line's own settings, then the
    point's)."""
    paired = paired or {}
    steps = [[((k, v),) for v in axes[k]] for k in axes]
    if paired:
        steps.append([tuple((k, values[i]) for k, values in paired.items())
                      for i in range(len(next(iter(paired.values()))))])
    points = []
    for combination in itertools.product(*steps):
        settings = dict(pair for step in combination for pair in step)
        points.append(SweepPoint(settings, load([f"{k}={v}" for k, v in settings.items()])))
    return points


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
