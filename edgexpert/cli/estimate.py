"""`estimate`: latency and energy per token of decoding policies on full-size MoE models at the
configured platform (sim/perf/estimate.py, docs/performance-model.md); `--calibrate` compares the EMA
cycle model with the RTL's cycles from the last `edgexpert bench ema`, and the compute model with
the accelerator top's cycles from the last `edgexpert bench top`. `sweep`: the estimate
over a grid of settings on Dask (sim/perf/sweep.py)."""

from __future__ import annotations

import json
from pathlib import Path

from ..contracts.errors import InputError
from .common import config_sources, load, print_json, publish, settings_options

__all__ = ["register", "calibration", "calibration_files"]


def calibration_files() -> dict[str, Path]:
    """The bench results the calibration reads, by comparison, where they exist: `ema` and
    `top` (the latency memory's `bench ema` summary and `bench top` cycle file), and per DRAM
    memory `ema_<memory>` and `top_<memory>` (`bench ema|top --memory M`)."""
    from ..sim.perf.ema_model import BENCH_MEMORIES
    from ..support.tools import build_root
    ema = build_root() / "bench" / "ema" / "summary.json"
    top = build_root() / "bench" / "top" / "cycles.json"
    files = {"ema": ema, "top": top}
    for memory in BENCH_MEMORIES[1:]:
        files[f"ema_{memory}"] = ema.with_name(f"summary-{memory}.json")
        files[f"top_{memory}"] = top.with_name(f"cycles-{memory}.json")
    return {name: path for name, path in files.items() if path.is_file()}


def calibration(config, show: bool) -> tuple[bool, dict, list[str]]:
    """The EMA cycle model against each `bench ema` summary, the compute model against the
    latency memory's `bench top` cycle file, the pass model against each DRAM memory's (the
    files of `calibration_files`); tables printed when `show`. Returns (every EMA comparison
    within its tolerance, the results by comparison, notes naming the benches not run)."""
    from ..support.tools import build_root
    files = calibration_files()
    ok, out, notes = True, {}, []
    if "ema" not in files:
        notes.append(f"no EMA benchmark at {build_root() / 'bench' / 'ema' / 'summary.json'} "
                     "(run `edgexpert bench ema`): the EMA cycle model is not checked")
    if "top" not in files:
        notes.append(f"no top cycle file at {build_root() / 'bench' / 'top' / 'cycles.json'} "
                     "(run `edgexpert bench top`): the compute model is not checked")
    for name, path in files.items():
        if name.startswith("ema"):
            ema_ok, out[name] = _calibrate_ema(path, not show)
            ok = ok and ema_ok
        elif name == "top":
            out[name] = _calibrate_top(path, config, not show)
        else:
            out[name] = _calibrate_dram_passes(path, config, not show)
    return ok, out, notes


def _calibrate(args) -> int:
    """`estimate --calibrate`: `calibration` printed, or as one JSON object; refused in one
    line when no bench has run."""
    config = load(args)
    if not calibration_files():
        raise InputError("no bench results to calibrate on (build/bench/ema/summary.json, "
                         "build/bench/top/cycles.json, or their DRAM memories'): run "
                         "`edgexpert bench ema` (and `edgexpert bench top`) first")
    ok, out, notes = calibration(config, show=not args.json)
    if args.json:
        print_json({**out, "notes": notes})
    else:
        for note in notes:
            print(note)
    return 0 if ok else 1


def _calibrate_ema(path: Path, quiet: bool) -> tuple[bool, dict]:
    from ..sim.perf.ema_model import calibrate
    result = calibrate(json.loads(path.read_text()))
    ok = result["max_abs_error"] <= result["tolerance"]
    if not quiet:
        print(f"EMA cycle model vs RTL ({path}); tolerance {result['tolerance']:.0%}")
        print(f"{'run':<16} {'RTL cycles':>11} {'model':>11} {'error':>9}")
        for name, run in sorted(result["runs"].items()):
            print(f"{name:<16} {run['rtl_cycles']:>11,} {run['model_cycles']:>11,} "
                  f"{run['error']:>+9.3%}")
        print(f"max |error| {result['max_abs_error']:.3%}: {'within' if ok else 'OUTSIDE'} "
              "the tolerance")
    return ok, result


def _calibrate_top(path: Path, config, quiet: bool) -> dict:
    """The compute model (sim.perf.passes.compute_cycles at platform.compute_utilization) against the top's
    measured cycles, pass by pass, and the prefill model against its prefill chunk when the file
    has one (a report: no tolerance, docs/performance-model.md)."""
    from ..contracts.cycles import CYCLES_FORMAT, CYCLES_VERSION
    from ..sim.perf.estimate import prefill_experts
    from ..sim.perf.models import BUNDLED, model_spec
    from ..sim.perf.passes import calibrate_compute, calibrate_prefill
    try:
        cycles = json.loads(path.read_text())
        if (cycles.get("format"), cycles.get("version")) != (CYCLES_FORMAT, CYCLES_VERSION):
            raise ValueError(f"format {cycles.get('format')!r} version {cycles.get('version')!r}")
        result = calibrate_compute(cycles, config.platform.compute_utilization)
        if cycles.get("prefill"):
            # the PRU is EdgeXpert's prompt routing: the model's prefill of that policy
            experts = prefill_experts(model_spec(BUNDLED), "edgexpert", config)
            result["prefill"] = calibrate_prefill(cycles, experts,
                                                  config.platform.compute_utilization)
    except (ValueError, KeyError, TypeError) as exc:
        raise InputError(f"{path} is not a top cycle file ({exc}): accepted {CYCLES_FORMAT} "
                         f"version {CYCLES_VERSION}; rerun `edgexpert bench top`") from None
    result["cycle_file"] = str(path)
    if quiet:
        return result
    u = result["model_utilization"]
    print(f"\ncompute model vs the accelerator top ({path}): the model's compute cycles "
          f"(MACs / (lanes x {u})) against the measured busy cycles, pass by pass")
    print(f"{'run':<16}{'pass':>5} {'kind':<7}{'tokens':>7}{'MACs':>12}{'busy':>10}"
          f"{'mem wait':>9}{'compute':>9}{'MACs/cyc':>9}{f'model@{u}':>11}{'error':>8}"
          f"{'model@meas':>11}{'error':>8}")
    for name, run in result["runs"].items():
        for p in run["passes"]:
            print(f"{name:<16}{p['pass']:>5} {p['kind']:<7}{p['tokens']:>7}{p['macs']:>12,}"
                  f"{p['busy']:>10,}{p['memory_wait']:>9,}{p['compute']:>9,}"
                  f"{p['macs_per_cycle']:>9.1f}{p['model_cycles']:>11,}{p['model_error']:>+8.1%}"
                  f"{p['measured_u_cycles']:>11,}{p['measured_u_error']:>+8.1%}")
    for name, run in result["runs"].items():
        kinds = ", ".join(f"{k} {v['utilization']:.3f}" for k, v in run["by_kind"].items())
        print(f"{name}: {run['macs_per_cycle']:.1f} MACs per cycle of {run['peak_macs_per_cycle']}"
              f" = utilization {run['utilization']:.3f} ({kinds}) against platform.compute_utilization "
              f"{u}: the model's {run['model_cycles']:,} cycles are {run['model_error']:+.1%} "
              f"of the measured {run['cycles']:,}; with the measured utilization every pass is "
              f"within {run['measured_u_max_abs_error']:.1%}; memory wait "
              f"{run['memory_wait_share']:.1%} of the cycles")
    if "prefill" in result:
        _print_prefill(result["prefill"])
    return result


def _calibrate_dram_passes(path: Path, config, quiet: bool) -> dict:
    """The pass model's time against the top's busy cycles on a DRAM memory, pass by pass (a
    report: no tolerance, docs/performance-model.md)."""
    from ..contracts.weight_layout import WeightLayout
    from ..sim.perf.passes import calibrate_dram_passes
    try:
        result = calibrate_dram_passes(json.loads(path.read_text()),
                                       WeightLayout.for_model(config.model),
                                       config.policies.coalescing_ratio,
                                       config.platform.compute_utilization)
    except (ValueError, KeyError, TypeError) as exc:
        raise InputError(f"{path} is not a top cycle file of a DRAM memory ({exc}); rerun "
                         "`edgexpert bench top --memory lpddr4x`") from None
    result["cycle_file"] = str(path)
    if quiet:
        return result
    print(f"\npass model vs the accelerator top on {result['memory']['memory']} ({path}): the "
          f"model's time (fetch at the DRAM's efficiency, compute at "
          f"{result['model_utilization']}, double buffered) against the busy cycles")
    print(f"{'run':<16}{'pass':>5} {'kind':<7}{'beats':>8}{'MACs':>12}{'busy':>9}{'mem wait':>9}"
          f"{'fetch':>9}{'compute':>9}{'model':>9}{'error':>8}")
    for name, run in result["runs"].items():
        for p in run["passes"]:
            print(f"{name:<16}{p['pass']:>5} {p['kind']:<7}{p['beats']:>8,}{p['macs']:>12,}"
                  f"{p['busy']:>9,}{p['memory_wait']:>9,}{p['fetch_cycles']:>9,}"
                  f"{p['compute_cycles']:>9,}{p['model_cycles']:>9,}{p['error']:>+8.1%}")
    for name, run in result["runs"].items():
        kinds = ", ".join(f"{k} {v['error']:+.1%} (memory wait {v['memory_wait_share']:.0%})"
                          for k, v in run["by_kind"].items())
        print(f"{name}: model {run['model_cycles']:,} cycles against {run['cycles']:,} "
              f"({run['error']:+.1%}; by kind {kinds}; worst pass "
              f"{run['max_abs_pass_error']:.1%})")
    for mode, chunk in result.get("prefill", {}).items():
        print(f"\nprefill chunk (pauses {mode}, {chunk['tokens']} tokens, whole experts) on "
              f"{result['memory']['memory']}, layer by layer")
        print(f"{'layer':>5}{'beats':>8}{'MACs':>12}{'busy':>9}{'mem wait':>9}{'fetch':>9}"
              f"{'compute':>9}{'model':>9}{'error':>8}")
        for e in chunk["per_layer"]:
            print(f"{e['layer']:>5}{e['beats']:>8,}{e['macs']:>12,}{e['busy']:>9,}"
                  f"{e['memory_wait']:>9,}{e['fetch_cycles']:>9,}{e['compute_cycles']:>9,}"
                  f"{e['model_cycles']:>9,}{e['error']:>+8.1%}")
        print(f"prefill/{mode}: model {chunk['model_cycles']:,} cycles against {chunk['busy']:,}"
              f" ({chunk['error']:+.1%}; worst layer {chunk['max_abs_layer_error']:.1%}; memory "
              f"wait {chunk['memory_wait_share']:.1%}; the engine at {chunk['utilization']:.3f} "
              f"of its peak against the model's {result['model_utilization']})")
    return result


def _print_prefill(prefill: dict) -> None:
    u, du = prefill["model_utilization"], prefill["decode_utilization"]
    at_du = "" if du is None else f" and at the whole-expert decode run's measured {du:.3f}"
    print(f"\nprefill model vs the top with its PRU, per chunk-layer: the model's compute cycles "
          f"at {u}{at_du}; the experts the chunk fetched against the model's mean chunk "
          "(EdgeXpert's prefill on the bundled model)")
    print(f"{'pauses':<8}{'tokens':>7}{'MACs':>11}{'busy':>9}{'mem wait':>9}{'MACs/cyc':>9}"
          f"{f'model@{u}':>12}{'error':>8}"
          + ("" if du is None else f"{f'model@{du:.3f}':>13}{'error':>8}")
          + f"{'experts':>9}{'model':>7}{'error':>8}")
    for mode, c in prefill["modes"].items():
        decode = ("" if c["decode_u_cycles"] is None else
                  f"{c['decode_u_cycles']:>13,}{c['decode_u_error']:>+8.1%}")
        print(f"{mode:<8}{c['tokens']:>7}{c['macs_per_layer']:>11,.0f}{c['busy_per_layer']:>9,.0f}"
              f"{c['memory_wait_share']:>9.1%}{c['macs_per_cycle']:>9.1f}"
              f"{c['model_cycles']:>12,}{c['model_error']:>+8.1%}{decode}"
              f"{c['experts_per_layer']:>9.1f}{c['model_experts_per_layer']:>7.1f}"
              f"{c['experts_error']:>+8.1%}")


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
        return _calibrate(args)
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
