"""`estimate --calibrate`: the performance model against the RTL's own cycles - the EMA cycle
model against the last `edgexpert bench ema` (per memory), the compute model against the
accelerator top's cycle file from the last `edgexpert bench top`, and the pass model against a
DRAM memory's cycle file (`bench top --memory M`), the prefill chunk's layers included
(docs/performance-model.md, "Calibration against the RTL", "Compute utilization against the
accelerator top"). `edgexpert report` shows the same comparisons."""

from __future__ import annotations

import json
from pathlib import Path

from ..contracts.errors import InputError
from .common import load, print_json

__all__ = ["run_calibration", "calibration", "calibration_files"]


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


def run_calibration(args) -> int:
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
