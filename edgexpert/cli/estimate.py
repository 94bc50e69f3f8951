"""`estimate`: latency and energy per token of decoding policies on full-size MoE models at the
configured platform (sim/estimate.py, docs/performance-model.md); `--calibrate` compares the EMA
cycle model with the RTL's cycles from the last `edgexpert bench ema`. `sweep`: the estimate
over a grid of settings on Dask (sim/sweep.py)."""

from __future__ import annotations

import json
from pathlib import Path

from ..contracts.errors import InputError
from .common import config_sources, load, print_json, publish, settings_options

__all__ = ["register"]


def _calibrate(args) -> int:
    from ..contracts.tools import build_root
    from ..sim.ema_model import calibrate

    load(args)
    summary_path = build_root() / "bench" / "ema" / "summary.json"
    if not summary_path.is_file():
        raise InputError(f"no EMA benchmark at {summary_path}: run `edgexpert bench ema` first")
    result = calibrate(json.loads(summary_path.read_text()))
    ok = result["max_abs_error"] <= result["tolerance"]
    if args.json:
        print_json(result)
    else:
        print(f"EMA cycle model vs RTL ({summary_path}); tolerance {result['tolerance']:.0%}")
        print(f"{'run':<16} {'RTL cycles':>11} {'model':>11} {'error':>9}")
        for name, run in sorted(result["runs"].items()):
            print(f"{name:<16} {run['rtl_cycles']:>11,} {run['model_cycles']:>11,} "
                  f"{run['error']:>+9.3%}")
        print(f"max |error| {result['max_abs_error']:.3%}: {'within' if ok else 'OUTSIDE'} "
              "the tolerance")
    return 0 if ok else 1


def _measured_runs(args) -> tuple[dict, list, list[str]]:
    """Measured decoding runs: each `--measured FILE` (a compare.json of `edgexpert compare`,
    the bundled model's; or a measured.json of `edgexpert trace --hf`, a checkpoint's), or by
    default the last `edgexpert compare` (build/compare/compare.json) when it exists; none under
    --synthetic. Returns ({model: {policy: summary}}, the traced models' specs, the files)."""
    from dataclasses import fields

    from ..contracts.tools import build_root
    from ..sim.models import BUNDLED, MoEModelSpec
    if args.synthetic:
        return {}, [], []
    paths = [Path(f) for f in args.measured] or [build_root() / "compare" / "compare.json"]
    measured, specs, used = {}, [], []
    for path in paths:
        if not path.is_file():
            if args.measured:
                raise InputError(f"no measured runs at {path}: accepted a compare.json of "
                                 "`edgexpert compare` or a measured.json of `edgexpert trace`")
            continue
        try:
            data = json.loads(path.read_text())
            policies = data["policies"]
            if not all("pass_kinds" in m for m in policies.values()):
                raise KeyError("pass_kinds")
            name = data.get("model", BUNDLED)
            if "spec" in data:
                keep = {f.name for f in fields(MoEModelSpec)}
                specs.append(MoEModelSpec(**{k: v for k, v in data["spec"].items() if k in keep}))
        except (ValueError, KeyError, TypeError) as exc:
            raise InputError(f"{path} is not a measured run with pass statistics ({exc}): "
                             "rerun the command that wrote it") from None
        measured[name] = policies
        used.append(str(path))
    return measured, specs, used


def _models(names: list[str] | None, traced: list) -> list:
    """The models to estimate: the named ones (a traced checkpoint by its name), else every
    registered model and every traced one."""
    from ..sim.models import model_names
    by_name = {spec.name: spec for spec in traced}
    if not names:
        return list(model_names()) + [s for n, s in by_name.items() if n not in model_names()]
    return [by_name.get(name, name) for name in names]


def cmd_estimate(args) -> int:
    if args.calibrate:
        return _calibrate(args)
    from ..sim.estimate import POLICIES, estimate

    config = load(args)
    policies = args.policy or list(POLICIES)
    measured, traced, sources = _measured_runs(args)
    models = _models(args.model, traced)
    rows = estimate(config, models, policies, measured=measured,
                    **({} if args.context is None else {"context": args.context}))

    def table(path: Path) -> None:
        print(f"{'model':<18} {'policy':<10} {'routing':<9} {'ms/token':>9} {'tok/s':>8} "
              f"{'mJ/token':>9} {'DRAM util':>9} {'roofline':>8}")
        for r in rows:
            print(f"{r['model']:<18} {r['policy']:<10} {r['routing']:<9} "
                  f"{r['latency_s_per_token'] * 1e3:>9.3f} {r['tokens_per_s']:>8.1f} "
                  f"{r['energy_j_per_token'] * 1e3:>9.3f} {r['dram_utilization']:>9.3f} "
                  f"{r['roofline_ratio']:>8.3f}")
        print("measured passes: " + (", ".join(sources) if sources else
                                     "none (synthetic routing everywhere)"))
        print(f"estimates {path}")

    publish(args, {"estimates": rows}, ("estimate", "estimate.json"), table, shown=rows)
    return 0


def cmd_sweep(args) -> int:
    import csv

    from ..contracts.config import load_config
    from ..contracts.tools import build_root
    from ..sim.estimate import POLICIES
    from ..sim.sweep import ROW_FIELDS, grid_points, parse_axes, run_sweep
    from .plot import sweep_plot

    axes = parse_axes(args.grid)
    path, overrides = config_sources(args)
    points = grid_points(axes, lambda point: load_config(path, overrides + point))
    policies = args.policy or list(POLICIES)
    if args.workers < 1:
        raise InputError(f"--workers {args.workers} is out of range: accepted integers >= 1")
    measured, traced, _ = _measured_runs(args)
    models = _models(args.model or ["bundled", "olmoe-1b-7b", "qwen3-30b-a3b"], traced)
    client, cluster = _dask_client(args)
    try:
        rows = run_sweep(points, models, policies, client, args.context, measured,
                         progress=not args.json)
    finally:
        client.close()
        if cluster is not None:
            cluster.close()
    out = build_root() / "sweep"
    out.mkdir(parents=True, exist_ok=True)
    table_path = out / "sweep.csv"
    with table_path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=[*axes, *ROW_FIELDS], extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)
    plot = sweep_plot(rows, list(axes)[0], out / "sweep.png",
                      f"edgexpert sweep: {len(points)} points ({', '.join(axes)}) x "
                      f"{len(models)} models x {len(policies)} policies")

    def table(path: Path) -> None:
        keys = list(axes)
        print("  ".join(f"{k:>14}" for k in keys)
              + f" {'model':<18} {'policy':<10} {'ms/token':>9} {'mJ/token':>9} {'DRAM util':>9}")
        for r in rows:
            print("  ".join(f"{r[k]:>14}" for k in keys)
                  + f" {r['model']:<18} {r['policy']:<10} {r['latency_ms_per_token']:>9.3f} "
                    f"{r['energy_mj_per_token']:>9.3f} {r['dram_utilization']:>9.3f}")
        print(f"table: {table_path}\nplot:  {plot}\nresults: {path}")

    publish(args, {"axes": axes, "models": models, "policies": policies, "rows": rows},
            ("sweep", "sweep.json"), table, shown=rows)
    return 0


def _dask_client(args):
    """A `distributed` client: on the scheduler at --scheduler, else on a local cluster of
    --workers processes (one thread each: the estimate is pure Python)."""
    import logging

    from distributed import Client, LocalCluster
    if args.scheduler:
        try:
            return Client(args.scheduler, timeout="10s"), None
        except OSError as exc:
            raise InputError(f"cannot reach the Dask scheduler at {args.scheduler}: {exc}: "
                             "accepted the address of a running scheduler "
                             "(tcp://HOST:PORT)") from None
    cluster = LocalCluster(n_workers=args.workers, threads_per_worker=1, processes=True,
                           dashboard_address=None, silence_logs=logging.ERROR)
    return Client(cluster), cluster


def _plan_options(p, default_models: str) -> None:
    """What `estimate` and `sweep` both price: models, policies, context, measured passes."""
    p.add_argument("--model", action="append", metavar="NAME",
                   help=f"a model (repeatable; default: {default_models})")
    p.add_argument("--policy", action="append", metavar="NAME",
                   help="a policy (repeatable; default: all eight)")
    p.add_argument("--context", type=int, metavar="TOKENS",
                   help="tokens already in the KV cache (default 512, "
                        "sim.estimate.CONTEXT_TOKENS)")
    _measured_options(p)


def _measured_options(p) -> None:
    p.add_argument("--measured", metavar="FILE", action="append", default=[],
                   help="measured passes (repeatable): a compare.json of `edgexpert compare` "
                        "(the bundled model) or a measured.json of `edgexpert trace --hf` "
                        "(default: build/compare/compare.json when it exists)")
    p.add_argument("--synthetic", action="store_true",
                   help="the bundled model's synthetic plan even when measured passes exist")


def register(sub) -> None:
    p = sub.add_parser("estimate", parents=[settings_options()],
                       help="latency and energy per token of each policy on each model at "
                            "`platform` (synthetic routing is labelled); --calibrate checks the "
                            "EMA model against the RTL bench")
    _plan_options(p, "every one, see docs/performance-model.md")
    p.add_argument("--calibrate", action="store_true",
                   help="EMA cycle model vs the RTL's cycles of the last `edgexpert bench ema`")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=cmd_estimate)

    p = sub.add_parser("sweep", parents=[settings_options()],
                       help="the estimate over a grid of settings x models x policies, on Dask "
                            "(a local cluster, or --scheduler)")
    p.add_argument("--grid", action="append", metavar="KEY=V1,V2,...", default=[],
                   help="an axis: a configuration key and its values (repeatable; the grid is "
                        "every combination), e.g. platform.dram.channels=1,2,4")
    _plan_options(p, "bundled, olmoe-1b-7b, qwen3-30b-a3b")
    p.add_argument("--scheduler", metavar="ADDRESS",
                   help="a running Dask scheduler (tcp://HOST:PORT); default: a local cluster")
    p.add_argument("--workers", type=int, default=2,
                   help="worker processes of the local cluster (default 2)")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=cmd_sweep)
