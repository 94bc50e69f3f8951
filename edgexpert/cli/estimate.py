"""`estimate`: latency and energy per token of decoding policies on full-size MoE models at the
configured platform (sim/perf/estimate.py, docs/performance-model.md); `--calibrate` compares
the model with the RTL's measured cycles (calibration.py). `sweep`: the estimate over a grid of
settings on Dask (sim/perf/sweep.py)."""

from __future__ import annotations

import json
from pathlib import Path

from ..contracts.errors import InputError
from .common import config_sources, load, publish, settings_options

__all__ = ["register"]


def _measured_runs(args) -> tuple[dict, list, list[str]]:
    """Measured decoding runs: each `--measured FILE` (a compare.json of `edgexpert compare`,
    the bundled model's; or a measured.json of `edgexpert trace --hf`, a checkpoint's), or by
    default the last `edgexpert compare` (build/compare/compare.json) when it exists; none under
    --synthetic. Returns ({model: {policy: summary}}, the traced models' specs, the files)."""
    from dataclasses import fields

    from ..support.tools import build_root
    from ..sim.perf.models import BUNDLED, MoEModelSpec
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
    from ..sim.perf.models import model_names
    by_name = {spec.name: spec for spec in traced}
    if not names:
        return list(model_names()) + [s for n, s in by_name.items() if n not in model_names()]
    return [by_name.get(name, name) for name in names]


def _axis(text: str | None, default: tuple, flag: str) -> tuple:
    """A comma-separated list of numbers (one line naming the flag when it is not)."""
    if text is None:
        return default
    try:
        return tuple(float(v) for v in text.split(","))
    except ValueError:
        raise InputError(f"{flag} {text!r} is not a list of numbers: accepted e.g. "
                         f"{','.join(f'{v:g}' for v in default)}") from None


def cmd_estimate(args) -> int:
    if args.calibrate:
        from .calibration import run_calibration
        return run_calibration(args)
    from ..sim.perf.estimate import (POLICIES, SENSITIVITY_ACCEPTANCE, SENSITIVITY_SHARES,
                                     estimate, sensitivity, validation)

    config = load(args)
    policies = args.policy or list(POLICIES)
    measured, traced, sources = _measured_runs(args)
    models = _models(args.model, traced)
    context = {} if args.context is None else {"context": args.context}
    sens = None
    if args.sensitivity or args.acceptance or args.share:
        sens = sensitivity(config, models, policies,
                           _axis(args.acceptance, SENSITIVITY_ACCEPTANCE, "--acceptance"),
                           _axis(args.share, SENSITIVITY_SHARES, "--share"), **context)
    rows = estimate(config, models, policies, measured=measured, **context)
    checks = validation(config)

    def table(path: Path) -> None:
        print(f"{'model':<18} {'policy':<10} {'routing':<9} {'tok/step':>8} {'ms/token':>9} "
              f"{'tok/s':>8} {'mJ/token':>9} {'DRAM util':>9} {'roofline':>8}  assumed inputs")
        for r in rows:
            assumed = [k for k, v in r["inputs"].items() if v["kind"] == "assumed"]
            print(f"{r['model']:<18} {r['policy']:<10} {r['routing']:<9} "
                  f"{r['tokens_per_step']:>8.2f} "
                  f"{r['latency_s_per_token'] * 1e3:>9.3f} {r['tokens_per_s']:>8.1f} "
                  f"{r['energy_j_per_token'] * 1e3:>9.3f} {r['dram_utilization']:>9.3f} "
                  f"{r['roofline_ratio']:>8.3f}  {', '.join(assumed) or '-'}")
        _print_split(rows)
        print(_costs_line(rows))
        print("measured passes: " + (", ".join(sources) if sources else
                                     "none (synthetic routing everywhere)"))
        print("inputs: each entry's `inputs` in the JSON says per input exact / measured / "
              "published / fitted / assumed, and its source")
        print("validation against published figures (model / published - 1):")
        for v in checks:
            print(f"  {v['figure']:<28} {v['model']:<15} published {v['published']:<6g} "
                  f"modelled {v['modelled']:<8.4g} error {v['error']:+.1%}")
        if sens is not None:
            _print_sensitivity(sens)
        print(f"estimates {path}")

    data = {"estimates": rows, "validation": checks}
    if sens is not None:
        data["sensitivity"] = sens
    publish(args, data, ("estimate", "estimate.json"), table,
            shown=rows if sens is None else data)
    return 0


def _print_split(rows: list[dict]) -> None:
    """Each row's energy per token by part, and its prefill per prompt token."""
    print("\nenergy per token by part (mJ; they add up to mJ/token) and prefill per prompt token:")
    print(f"{'model':<18} {'policy':<10} {'DRAM':>8} {'SRAM':>8} {'MAC':>8} {'control':>8}  "
          f"{'prefill ms':>10} {'prefill mJ':>10} {'prefill bytes':>13}")
    for r in rows:
        e, p = r["energy_j_per_token_split"], r["prefill"]
        print(f"{r['model']:<18} {r['policy']:<10} "
              + " ".join(f"{e[k] * 1e3:>8.3f}" for k in ("dram", "sram", "mac", "control"))
              + f"  {p['latency_s_per_prompt_token'] * 1e3:>10.3f} "
                f"{p['energy_j_per_prompt_token'] * 1e3:>10.3f} "
                f"{p['bytes_per_prompt_token']:>13,.0f}")


def _costs_line(rows: list[dict]) -> str:
    """Where the energy costs came from: the cost table of `synth --all`, or the cited defaults
    (sim/perf/passes.py DEFAULT_COSTS) for the entries it lacks."""
    sources = {k: v for r in rows for k, v in r["cost_sources"].items()}
    default = sorted(k for k, v in sources.items() if v.startswith("cited default"))
    if not default:
        return "costs: the cost table of `edgexpert synth --all` (each entry's source in the JSON)"
    which = "every cost" if len(default) == len(sources) else ", ".join(default)
    return (f"costs: cited defaults for {which} (sim/perf/passes.py DEFAULT_COSTS), not in a "
            "cost table: `edgexpert synth --all` writes this machine's")


def _print_sensitivity(sens: list[dict]) -> None:
    """Latency per token against tokens per step and against the distinct-expert share, per
    model and policy, with the break-even tokens per step against plain decoding."""
    print("\nsensitivity: ms per token against tokens per step (columns), break-even against "
          "ar (tokens per step; '-': not reachable by the policy's draft)")
    for r in sens:
        cells = " ".join(f"{p['tokens_per_step']:g}:{p['latency_s_per_token'] * 1e3:.2f}"
                         for p in r["by_acceptance"])
        be = r["break_even_tokens_per_step"]
        print(f"  {r['model']:<18} {r['policy']:<10} break-even "
              f"{'-' if be is None else f'{be:.2f}':>5}  {cells}")
    print("sensitivity: ms per token against the share of a layer's experts the step's target "
          "pass activates (at the policy's own tokens per step)")
    for r in sens:
        cells = " ".join(f"{p['share']:g}:{p['latency_s_per_token'] * 1e3:.2f}"
                         for p in r["by_share"])
        print(f"  {r['model']:<18} {r['policy']:<10} {cells}")


def cmd_sweep(args) -> int:
    import csv

    from ..contracts.config import load_config
    from ..support.tools import build_root
    from ..sim.perf.estimate import POLICIES
    from ..sim.perf.sweep import ROW_FIELDS, grid_points, parse_axes, parse_paired, run_sweep
    from .plot import sweep_plot

    load(args)   # the command's own settings, checked and recorded before the grid's
    axes = parse_axes(args.grid, required=not args.paired)
    paired = parse_paired(args.paired, axes)
    path, overrides = config_sources(args)
    points = grid_points(axes, lambda point: load_config(path, overrides + point), paired)
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
        writer = csv.DictWriter(f, fieldnames=[*axes, *paired, *ROW_FIELDS],
                                extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)
    # the x axis: the first --grid axis, else the paired keys together
    x_keys = list(axes)[:1] or list(paired)
    names = [*axes] + ([" with ".join(paired)] if paired else [])
    plot = sweep_plot(rows, x_keys, out / "sweep.png",
                      f"edgexpert sweep: {len(points)} points ({', '.join(names)}) x "
                      f"{len(models)} models x {len(policies)} policies")

    def table(path: Path) -> None:
        keys = [*axes, *paired]
        print("  ".join(f"{k:>14}" for k in keys)
              + f" {'model':<18} {'policy':<10} {'ms/token':>9} {'mJ/token':>9} {'DRAM util':>9}")
        for r in rows:
            print("  ".join(f"{r[k]:>14}" for k in keys)
                  + f" {r['model']:<18} {r['policy']:<10} {r['latency_ms_per_token']:>9.3f} "
                    f"{r['energy_mj_per_token']:>9.3f} {r['dram_utilization']:>9.3f}")
        print(f"table: {table_path}\nplot:  {plot}\nresults: {path}")

    publish(args, {"axes": axes, "paired": paired, "models": models, "policies": policies,
                   "rows": rows},
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
                        "sim.perf.estimate.CONTEXT_TOKENS)")
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
                            "EMA and compute models against the RTL benches")
    _plan_options(p, "every one, see docs/performance-model.md")
    p.add_argument("--sensitivity", action="store_true",
                   help="latency per token against tokens per step and against the "
                        "distinct-expert share, and each policy's break-even against ar (the "
                        "JSON becomes {estimates, validation, sensitivity})")
    p.add_argument("--acceptance", metavar="A,B,...",
                   help="tokens per step of the sensitivity (default 1.5..6 by 0.5; accepted "
                        "1..decode.max_depth + 1)")
    p.add_argument("--share", metavar="X,Y,...",
                   help="distinct-expert shares of the sensitivity (default 0.1..1 by 0.1; "
                        "accepted (0, 1])")
    p.add_argument("--calibrate", action="store_true",
                   help="the EMA cycle model vs the RTL's cycles of the last `edgexpert bench "
                        "ema`, and the compute model vs the top's cycle file of the last "
                        "`edgexpert bench top`, each when present")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=cmd_estimate)

    p = sub.add_parser("sweep", parents=[settings_options()],
                       help="the estimate over a grid of settings x models x policies, on Dask "
                            "(a local cluster, or --scheduler)")
    p.add_argument("--grid", action="append", metavar="KEY=V1,V2,...", default=[],
                   help="an axis: a configuration key and its values (repeatable; the grid is "
                        "every combination), e.g. platform.dram.channels=1,2,4")
    p.add_argument("--paired", action="append", metavar="KEY=V1,V2,...", default=[],
                   help="axes that move together, as one more axis of the grid (repeatable; "
                        "each with as many values), e.g. --paired platform.dram.type=LPDDR4X,"
                        "LPDDR5 --paired platform.dram.data_rate_mtps=4266,6400")
    _plan_options(p, "bundled, olmoe-1b-7b, qwen3-30b-a3b")
    p.add_argument("--scheduler", metavar="ADDRESS",
                   help="a running Dask scheduler (tcp://HOST:PORT); default: a local cluster")
    p.add_argument("--workers", type=int, default=2,
                   help="worker processes of the local cluster (default 2)")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=cmd_sweep)
