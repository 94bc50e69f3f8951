"""The `edgexpert` command line.

Every subcommand takes `--config FILE` (YAML, any subset of the bundled defaults) and
`--set KEY=VALUE` overrides. Bad input exits non-zero with one line on stderr, no traceback:
2 for bad input (a configuration value, an argument, a checkpoint, a prompt or trace file), 1 when
a tool, simulation or synthesis run fails.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path

from .contracts.config import Config, load_config
from .contracts.errors import InputError

__all__ = ["main"]

DEMO_SEED = 20261129
#: `edgexpert calibrate prefill`'s MSE bound: docs/policies.md says how it was fixed
MSE_BOUND = 0.012


def _load(args) -> Config:
    return load_config(args.config, args.set)


def _golden(checkpoint: str | None = None, prompts: str | None = None):
    """What the decoding commands start from: (checkpoint, corpus, prompts, end-of-text id)."""
    from .golden.checkpoint import load_checkpoint
    from .golden.corpus import load_corpus
    from .golden.prompts import load_prompts
    from .golden.tokenizer import EOT
    ckpt = load_checkpoint(checkpoint)
    corpus = load_corpus()
    return (ckpt, corpus, load_prompts(corpus, ckpt.tokenizer, prompts),
            ckpt.tokenizer.token_to_id(EOT))


def cmd_doctor(args) -> int:
    from .contracts.tools import check_tools
    tools = check_tools()
    if args.json:
        print(json.dumps({t.name: {"found": t.found, "version": t.version, "location": t.location}
                          for t in tools}, indent=2))
    else:
        width = max(len(t.name) for t in tools)
        for t in tools:
            status = t.version if t.found else "MISSING"
            print(f"{t.name:<{width}}  {status:<20}  {t.location}")
        for t in tools:
            if not t.found:
                print(f"{t.name}: run {t.hint}")
    return 0 if all(t.found for t in tools) else 1


def cmd_rtl(args) -> int:
    from .blocks import get_block
    from .hw.emit import emit_rtl
    config = _load(args)
    block = get_block(args.block)
    files = emit_rtl(block.build(config), block.name, Path(args.out))
    for kind, path in [("rtlil", files.rtlil), ("verilog", files.verilog),
                       ("simulation verilog", files.sim_verilog)]:
        print(f"{kind:<19} {path}")
    return 0


def _synth_block(config: Config, name: str):
    from .blocks import get_block
    from .synth.report import run_block, summarize
    block = get_block(name)
    result = run_block(block, config)
    return result, summarize(block, config, result)


def cmd_synth(args) -> int:
    from .blocks import BLOCKS
    from .synth.report import format_si
    config = _load(args)
    if args.all == (args.block is not None):
        raise InputError(f"synth needs a BLOCK or --all, not {'both' if args.all else 'neither'}"
                          f": accepted blocks {', '.join(sorted(BLOCKS))}")
    if args.all:
        return _synth_all(config, args.json)
    result, summary = _synth_block(config, args.block)
    scaled = summary["scaled_28nm"]
    if args.json:
        print(json.dumps({**result.to_json(), "scaled_28nm": scaled}, indent=2, sort_keys=True))
        return 0
    print(f"block              {result.top}  ({result.node})")
    print(f"cells              {result.cells}  ({result.flip_flops} flip-flops)")
    print(f"area_um2           {result.area_um2:.0f}")
    print(f"critical_path_ns   {result.critical_path_ns:.3f}  "
          f"{result.startpoint} -> {result.endpoint}")
    print(f"fmax_hz            {result.fmax_hz:.4g}  ({result.fmax_hz / 1e6:.1f} MHz)")
    for memory in result.memories:
        print(f"memory             {memory['name']}: {memory['depth']} x {memory['width']} bits, "
              "cut out of the netlist (SRAM model)")
    if result.power:
        p = result.power
        print(f"power_w            {p['dynamic_w']:.4g} dynamic + {p['leakage_w']:.3g} leakage at "
              f"{p['clock_hz'] / 1e6:.0f} MHz ({p['cycles']} cycles, seed {p['seed']})")
        print(f"energy_per_op_j    {p['energy_per_op_j']:.4g} per {p['operation']}")
    print(f"at 28 nm {scaled['vdd_v']} V   area {scaled['area_mm2']:.4g} mm2, fmax "
          f"{scaled['fmax_hz'] / 1e6:.0f} MHz"
          + (f", {format_si(scaled['energy_per_op_j'], 'J')} per {scaled['operation']}"
             if result.power else "") + "  (scaled: docs/synthesis.md)")
    print(f"cache              {'hit' if result.cached else 'miss'}  {result.work_dir}")
    return 0


def _synth_all(config: Config, as_json: bool) -> int:
    from .blocks import BLOCKS
    from .synth.report import report_paths, write_reports
    report = write_reports([BLOCKS[name] for name in sorted(BLOCKS)], config)
    paths = report_paths()
    if as_json:
        print(paths["json"].read_text())
        return 0
    text = paths["markdown"].read_text()
    print("\n".join(line for line in text.splitlines() if line.startswith("|")))
    cached = sum(b["cached"] for b in report["blocks"].values())
    print(f"\n{len(report['blocks'])} blocks ({cached} from the cache); report {paths['markdown']}"
          f" and {paths['json'].name}, cost table {paths['costs']}")
    return 0


def cmd_demo(args) -> int:
    """The vertical path for the lane (RTL -> cocotb on both simulators -> synthesis and power),
    then the golden model it serves decoding the bundled prompts."""
    from .cocotb_tests.mac_lane import run_bench
    from .blocks import get_block
    from .hw.emit import emit_rtl
    from .sim.runner import SIMULATORS
    from .synth.report import format_si
    from .contracts.tools import build_root

    config = _load(args)
    pairs = config.hardware.mac_lane.pairs_per_beat
    block = get_block("mac_lane")
    out = build_root() / "demo"
    log = (lambda *a: None) if args.json else print
    log(f"edgexpert demo: {block.description}, pairs_per_beat={pairs}, seed {DEMO_SEED}")

    files = emit_rtl(block.build(config), block.name, out / "rtl")
    log(f"  rtl        {files.rtlil.parent}/ ({files.rtlil.name}, {files.verilog.name}, "
        f"{files.sim_verilog.name})")
    summary = {"block": block.name, "pairs_per_beat": pairs, "seed": DEMO_SEED,
               "rtl_dir": str(files.rtlil.parent), "simulation": {}}
    for simulator in SIMULATORS:
        result = run_bench(pairs, simulator, seed=DEMO_SEED)
        tests = result.report["tests"]
        checked = sum(t["dot_products"] for t in tests.values())
        rate = tests["random_vectors/none/none"]["beats_per_cycle"]
        summary["simulation"][simulator] = {"cocotb_tests_passed": result.passed,
                                            "cocotb_tests_skipped": result.skipped,
                                            "dot_products_checked": checked,
                                            "beats_per_cycle_no_backpressure": rate,
                                            "build_dir": str(result.build_dir)}
        skipped = f" ({result.skipped} skipped: the int32 wrap needs wide beats)" \
            if result.skipped else ""
        log(f"  {simulator:<10} {result.passed} cocotb tests passed{skipped}; {checked} dot "
            f"products equal to golden bit for bit; {rate:.3f} beats/cycle without backpressure")
    synth, costs = _synth_block(config, block.name)
    summary["synthesis"] = {k: synth.to_json()[k] for k in
                            ("cells", "area_um2", "critical_path_ns", "fmax_hz", "startpoint",
                             "endpoint", "node", "key")}
    summary["synthesis"]["energy_per_mac_j"] = synth.power["energy_per_op_j"]
    summary["synthesis"]["scaled_28nm"] = costs["scaled_28nm"]
    log(f"  synth      {synth.cells} cells, {synth.area_um2:.0f} um2, critical path "
        f"{synth.critical_path_ns:.3f} ns ({synth.startpoint} -> {synth.endpoint}), "
        f"fmax {synth.fmax_hz / 1e6:.1f} MHz at {synth.node}")
    log(f"  power      {format_si(synth.power['energy_per_op_j'], 'J')} per MAC at 180 nm "
        f"({synth.power['dynamic_w'] * 1e3:.2f} mW at {synth.power['clock_hz'] / 1e6:.0f} MHz); "
        f"scaled to 28 nm: {format_si(costs['scaled_28nm']['energy_per_op_j'], 'J')} per MAC, "
        f"{costs['scaled_28nm']['area_mm2']:.4f} mm2")

    # the golden model whose integer path the lane computes: plain vs speculative decoding
    from .golden.decode import compare_modes
    from .golden.int_model import quantize_model
    ckpt, _, prompts, eot = _golden()
    decoded = compare_modes(quantize_model(ckpt.model), prompts, config.decode, eot)
    summary["golden"] = {"prompts": len(prompts), "ar": decoded["ar"],
                         "naive_sd": decoded["naive_sd"], "lossless": decoded["lossless"]}
    ar, sd = decoded["ar"], decoded["naive_sd"]
    log(f"  golden     {len(prompts)} held-out prompts on the A8W4 integer path: speculative "
        f"decoding {sd['tokens_per_step']:.2f} tokens/step, output equal to greedy: "
        f"{decoded['lossless']}; expert EMA bytes/token {ar['ema_bytes_per_token']} plain, "
        f"{sd['ema_bytes_per_token']} speculative")
    (out / "summary.json").write_text(json.dumps(summary, indent=2, sort_keys=True))
    log(f"  summary    {out / 'summary.json'}")
    if args.json:
        print(json.dumps(summary, indent=2, sort_keys=True))
    return 0


def cmd_train(args) -> int:
    import shlex

    from .golden.checkpoint import bundled_checkpoint_dir
    from .golden.train import train
    from .contracts.tools import build_root
    config = _load(args)
    out = bundled_checkpoint_dir() if args.install else Path(args.out or build_root() / "train")
    command = "edgexpert " + " ".join(shlex.quote(a) for a in sys.argv[1:])
    meta = train(config, out, command, progress=not args.quiet)
    print(f"checkpoint {out}: held-out loss {meta['heldout_loss']} nats/token "
          f"(bigram baseline {meta['bigram_heldout_loss']}), {meta['train_tokens_per_second']} tokens/s")
    return 0


def cmd_prune(args) -> int:
    import shlex

    from .golden.prune import bundled_pruned_dir, check_sparsity, recover
    from .contracts.tools import build_root
    config = _load(args)
    check_sparsity(args.sparsity)
    out = bundled_pruned_dir() if args.install else \
        Path(args.out or build_root() / "prune" / f"s{args.sparsity:g}_n{args.steps}")
    command = "edgexpert " + " ".join(shlex.quote(a) for a in sys.argv[1:])
    meta = recover(config, args.sparsity, args.steps, args.lr, out, command,
                   parent=args.checkpoint, progress=not args.quiet)
    prune = meta["prune"]
    report = {"checkpoint": str(out), "sparsity": prune["sparsity"], "steps": prune["steps"],
              "seed": meta["seed"], "heldout_loss_parent": prune["parent_heldout_loss"],
              "heldout_loss_masked": prune["masked_heldout_loss"],
              "heldout_loss_recovered": meta["heldout_loss"],
              "train_seconds": prune["train_seconds"]}
    if args.json:
        print(json.dumps(report, indent=2, sort_keys=True))
        return 0
    print(f"checkpoint {out}: sparsity {prune['sparsity']}, {prune['steps']} recovery steps "
          f"(seed {meta['seed']}); held-out loss {prune['parent_heldout_loss']} parent, "
          f"{prune['masked_heldout_loss']} masked, {meta['heldout_loss']} recovered nats/token")
    return 0


def cmd_decode(args) -> int:
    from .golden.decode import FloatEngine, compare_modes
    from .golden.int_model import quantize_model
    from .golden.traces import build_trace, write_trace

    config = _load(args)
    ckpt, _, prompts, eot = _golden(args.checkpoint, args.prompts)
    if args.traces and args.path != "int":
        raise InputError("--traces needs the integer path (--path int): traces carry its exact "
                         "int8 inputs and outputs")
    engine = quantize_model(ckpt.model) if args.path == "int" else FloatEngine(ckpt.model)
    result = compare_modes(engine, prompts, config.decode, eot, keep_traces=bool(args.traces))
    report = {"path": args.path, "prompts": len(prompts), "seed": config.decode.seed,
              "ar": result["ar"], "naive_sd": result["naive_sd"], "lossless": result["lossless"]}
    if args.traces:
        trace = build_trace(result["runs"]["naive_sd"], ckpt.model.cfg, config.decode,
                            {"checkpoint": str(ckpt.path), "mode": "naive_sd",
                             "tokenizer_sha256": ckpt.meta.get("tokenizer_sha256")})
        write_trace(trace, Path(args.traces))
    if args.json:
        print(json.dumps(report, indent=2, sort_keys=True))
        return 0
    d = config.decode
    print(f"edgexpert decode: {len(prompts)} held-out prompts, {args.path} path, "
          f"{d.max_new_tokens} new tokens each; draft: top-{d.draft_experts} experts, depth "
          f"{d.max_depth}, {d.max_candidates} candidates; seed {d.seed}")
    keys = ["tokens_per_step", "acceptance_length", "experts_per_step", "draft_experts_per_step",
            "ema_bytes_per_token", "ema_bytes_per_token_verify", "ema_bytes_per_token_draft"]
    print(f"{'':<28}{'ar':>14}{'naive_sd':>14}")
    for key in keys:
        print(f"{key:<28}{result['ar'][key]:>14}{result['naive_sd'][key]:>14}")
    print(f"speculative output equals greedy decoding: {result['lossless']}")
    if args.traces:
        print(f"traces: {args.traces}")
    return 0


COMPARE_COLUMNS = [("tokens_per_step", "tok/step"), ("experts_per_step", "experts/step"),
                   ("ema_bytes_per_token_prefill", "EMA B/tok prefill"),
                   ("ema_bytes_per_token_decode", "EMA B/tok decode"),
                   ("ema_reduction_vs_naive_sd", "vs naive_sd"), ("top1_agreement", "top-1"),
                   ("mean_kl", "KL"), ("ppl_ratio", "ppl ratio"),
                   ("greedy_prefix_match", "greedy match")]


def _policy_inputs(args, config):
    """What `compare` and `ablate` measure on: (checkpoint, prompts, held-out windows,
    end-of-text id)."""
    from .golden.train import eval_windows, token_streams
    ckpt, corpus, prompts, eot = _golden(args.checkpoint)
    p = config.policies
    _, heldout = token_streams(corpus, ckpt.tokenizer)
    windows = [w.tolist() for w in
               eval_windows(heldout, p.eval_prompt_tokens + p.eval_continuation - 1, p.eval_windows)]
    return ckpt, prompts, windows, eot


def _print_policy_table(results: dict, first: str) -> None:
    width = max(len(first), *(len(name) for name in results)) + 2
    print(f"{first:<{width}}" + "".join(f"{title:>18}" for _, title in COMPARE_COLUMNS))
    for name, metrics in results.items():
        print(f"{name:<{width}}" + "".join(f"{metrics[key]:>18}" for key, _ in COMPARE_COLUMNS))


def _policy_header(command: str, config, prompts, windows) -> str:
    p = config.policies
    return (f"edgexpert {command}: {len(prompts)} bundled prompts ({config.decode.max_new_tokens} "
            f"new tokens, greedy) and {len(windows)} held-out windows ({p.eval_prompt_tokens} + "
            f"{p.eval_continuation} tokens, teacher-forced) on the float path; seed "
            f"{config.decode.seed}")


def cmd_compare(args) -> int:
    from .golden.evaluate import compare
    from .golden.prefill import load_encoder
    from .plot import tradeoff_plot
    from .contracts.tools import build_root

    config = _load(args)
    ckpt, prompts, windows, eot = _policy_inputs(args, config)
    result = compare(config, ckpt.model, prompts, windows, eot, load_encoder(ckpt.model)[0])
    out = build_root() / "compare" / "compare.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    report = {"policies": result, "prompts": len(prompts), "windows": len(windows),
              "decode": dataclasses.asdict(config.decode),
              "settings": dataclasses.asdict(config.policies)}
    out.write_text(json.dumps(report, indent=2, sort_keys=True))
    header = _policy_header("compare", config, prompts, windows)
    plot = tradeoff_plot(result, out.with_suffix(".png"), header)
    if args.json:
        print(json.dumps(result, indent=2, sort_keys=True))
        return 0
    print(header)
    _print_policy_table(result, "policy")
    print(f"table: {out}\nplot:  {plot}")
    return 0


def cmd_ablate(args) -> int:
    from .golden.ablate import STUDIES, run_study
    from .golden.prefill import load_encoder
    from .plot import tradeoff_plot
    from .contracts.tools import build_root

    config = _load(args)
    studies = list(STUDIES) if args.all else args.study
    if not studies:
        raise InputError(f"name a study or pass --all: accepted {', '.join(STUDIES)}")
    for study in studies:
        if study not in STUDIES:
            raise InputError(f"unknown study {study!r}: accepted {', '.join(STUDIES)}")
    ckpt, prompts, windows, eot = _policy_inputs(args, config)
    header = _policy_header("ablate", config, prompts, windows)
    encoder = load_encoder(ckpt.model)[0]
    everything = {}
    for study in studies:
        progress = (lambda label: None) if args.json else \
            (lambda label: print(f"  {study}: {label}", file=sys.stderr, flush=True))
        result = run_study(study, config, ckpt.model, prompts, windows, eot, encoder, progress)
        everything[study] = result
        out = build_root() / "ablate" / f"{study}.json"
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps({"study": study, "question": STUDIES[study], "settings": result,
                                   "prompts": len(prompts), "windows": len(windows),
                                   "decode": dataclasses.asdict(config.decode),
                                   "policies": dataclasses.asdict(config.policies)},
                                  indent=2, sort_keys=True))
        plot = tradeoff_plot(result, out.with_suffix(".png"), f"{study}: {STUDIES[study]}")
        if not args.json:
            print(f"{header}\n{study}: {STUDIES[study]}")
            _print_policy_table(result, "setting")
            print(f"table: {out}\nplot:  {plot}\n")
    if args.json:
        print(json.dumps(everything, indent=2, sort_keys=True))
    return 0


def cmd_prefill_train(args) -> int:
    """Train EdgeXpert's prefill token encoder for the bundled checkpoint (golden/prefill.py)."""
    import shlex

    import torch

    from .golden.prefill import EncoderSettings, bundled_encoder_dir, save_encoder, train_encoder
    from .golden.train import token_streams
    from .contracts.tools import build_root
    if args.steps is not None and not 1 <= args.steps <= 1_000_000:
        raise InputError(f"--steps {args.steps} is out of range: accepted 1..1000000")
    # one thread: bit-identical reruns, and the other core stays free
    torch.set_num_threads(1)
    ckpt, corpus, _, _ = _golden(args.checkpoint)
    train_stream, heldout_stream = token_streams(corpus, ckpt.tokenizer)
    settings = EncoderSettings(steps=args.steps) if args.steps else EncoderSettings()
    encoder, meta = train_encoder(ckpt.model, train_stream, heldout_stream, settings)
    meta["command"] = "edgexpert " + " ".join(shlex.quote(a) for a in sys.argv[1:])
    meta["checkpoint"] = str(ckpt.path)
    out = build_root() / "prefill" / "encoder"
    save_encoder(encoder, meta, out)
    if args.install:
        save_encoder(encoder, meta, bundled_encoder_dir())
    print(f"prefill encoder {out}{' (installed in ' + str(bundled_encoder_dir()) + ')' if args.install else ''}: "
          f"held-out Spearman {meta['heldout_spearman']} over {meta['heldout_windows']} windows, "
          f"{meta['train_seconds']} s, seed {settings.seed}")
    return 0


def _prompt_windows(stream, config, count: int) -> list[list[int]]:
    """`count` windows of policies.eval_prompt_tokens tokens spread evenly over `stream`."""
    from .golden.train import eval_windows
    return [w.tolist() for w in eval_windows(stream, config.policies.eval_prompt_tokens - 1, count)]


def _check_windows(count: int) -> None:
    if not 1 <= count <= 10_000:
        raise InputError(f"--windows {count} is out of range: accepted 1..10000")


def cmd_calibrate(args) -> int:
    """Sweep EdgeXpert's prefill thresholds and budgets on training-split windows and choose the
    operating point (golden/prefill_calibration.py)."""
    import torch

    from .golden.prefill import load_encoder
    from .golden.prefill_calibration import choose, default_grid, pareto_front, sweep
    from .golden.train import token_streams
    from .contracts.tools import build_root
    config = _load(args)
    _check_windows(args.windows)
    if not 0 < args.mse_bound < 1:
        raise InputError(f"--mse-bound {args.mse_bound} is out of range: accepted (0, 1)")
    torch.set_num_threads(1)
    ckpt, corpus, _, _ = _golden(args.checkpoint)
    encoder, _ = load_encoder(ckpt.model)
    train_stream, _ = token_streams(corpus, ckpt.tokenizer)
    # prefill bodies: a prompt of eval_prompt_tokens minus its last token (the first root)
    windows = torch.tensor(_prompt_windows(train_stream, config, args.windows))[:, :-1]
    chunk = config.policies.prefill_chunk
    points = sweep(ckpt.model, encoder, windows, chunk, default_grid(ckpt.model.cfg.top_k))
    front = pareto_front(points)
    chosen = choose(points, args.mse_bound)
    native = next(p for p in points if p["tau_major"] == 0)   # every token major
    report = {"windows": len(windows), "split": "train", "prompt_tokens": windows.shape[1],
              "chunk": chunk, "mse_bound": args.mse_bound, "rule": "fewest bytes_per_token on the "
              "Pareto front of (bytes_per_token, mse) with mse <= mse_bound",
              "native_bytes_per_token": native["bytes_per_token"], "chosen": chosen,
              "front": front, "points": points}
    out = build_root() / "calibrate" / "prefill.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2, sort_keys=True))
    if args.json:
        print(json.dumps(report, indent=2, sort_keys=True))
        return 0
    print(f"edgexpert calibrate prefill: {len(points)} settings on {len(windows)} training-split "
          f"windows of {windows.shape[1]} tokens, chunk {chunk}; native top-"
          f"{ckpt.model.cfg.top_k}: {native['bytes_per_token']} B/token")
    print("Pareto front (bytes/token vs MoE output MSE relative to native top-K):")
    print(f"{'tau_major':>10}{'tau_minor':>10}{'k':>3}{'n':>3}{'mse':>10}{'experts/tok':>12}"
          f"{'B/token':>9}{'vs native':>10}")
    for p in front:
        mark = "  <- chosen" if p is chosen else ""
        print(f"{p['tau_major']:>10}{p['tau_minor']:>10}{p['budget_minor']:>3}"
              f"{p['budget_trivial']:>3}{p['mse']:>10.5f}{p['experts_per_token']:>12.3f}"
              f"{p['bytes_per_token']:>9}{p['bytes_per_token'] / native['bytes_per_token'] - 1:>+10.1%}"
              f"{mark}")
    print(f"chosen (fewest bytes with mse <= {args.mse_bound}): policies.prefill_tau_major="
          f"{chosen['tau_major']} prefill_tau_minor={chosen['tau_minor']} prefill_budget_minor="
          f"{chosen['budget_minor']} prefill_budget_trivial={chosen['budget_trivial']}")
    print(f"table: {out}")
    return 0


def cmd_prefill_ablate(args) -> int:
    """EdgeXpert's prefill on held-out windows: k/n budgets, encoder vs random classes, chunk."""
    import torch

    from .golden.decode import FloatEngine
    from .golden.prefill import load_encoder
    from .golden.prefill_calibration import ablate
    from .golden.train import token_streams
    from .contracts.tools import build_root
    config = _load(args)
    _check_windows(args.windows)
    if args.front is not None and not 0 < args.front < 1:
        raise InputError(f"--front {args.front} is out of range: accepted (0, 1)")
    torch.set_num_threads(1)
    ckpt, corpus, _, _ = _golden(args.checkpoint)
    encoder, _ = load_encoder(ckpt.model)
    _, heldout = token_streams(corpus, ckpt.tokenizer)
    windows = _prompt_windows(heldout, config, args.windows)
    p = config.policies
    front = []
    if args.front:
        calibration = build_root() / "calibrate" / "prefill.json"
        if not calibration.is_file():
            raise InputError(f"--front needs {calibration}: run `edgexpert calibrate prefill` first")
        front = [q for q in json.loads(calibration.read_text())["front"]
                 if q["mse"] <= args.front]
    print(f"edgexpert prefill ablate: {len(windows)} held-out windows of {len(windows[0])} tokens, "
          f"float path; tau_major {p.prefill_tau_major}, tau_minor {p.prefill_tau_minor}, "
          f"chunk {p.prefill_chunk}; random classes seed {p.prefill_seed}")
    result = ablate(FloatEngine(ckpt.model), ckpt.model, encoder, windows, p, config.decode,
                    front, log=(lambda *a: None) if args.json else print)
    report = {"windows": len(windows), "split": "heldout", "settings": dataclasses.asdict(p),
              **result}
    out = build_root() / "prefill" / "ablate.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2, sort_keys=True))
    if args.json:
        print(json.dumps(report, indent=2, sort_keys=True))
    else:
        print(f"table: {out}")
    return 0


def cmd_analyze(args) -> int:
    from .golden.analysis import coactivation, compare_paths, routing_skew
    from .golden.decode import decode_speculative
    from .golden.int_model import quantize_model
    from .golden.train import eval_windows, token_streams

    config = _load(args)
    ckpt, corpus, prompts, eot = _golden(args.checkpoint)
    _, heldout = token_streams(corpus, ckpt.tokenizer)
    seq = ckpt.meta["eval"]["seq_len"]
    engine = quantize_model(ckpt.model)
    report = {
        "checkpoint": str(ckpt.path),
        "heldout_loss": ckpt.meta["heldout_loss"], "bigram_heldout_loss": ckpt.meta["bigram_heldout_loss"],
        "int_vs_float": compare_paths(ckpt.model, engine, eval_windows(heldout, seq, args.windows)),
        "routing_skew_hot25": routing_skew(ckpt.model, eval_windows(heldout, seq, ckpt.meta["eval"]["windows"])),
    }
    runs = [decode_speculative(engine, p, config.decode, eot, keep_traces=True) for p in prompts]
    report["coactivation"] = coactivation(runs)
    if args.json:
        print(json.dumps(report, indent=2, sort_keys=True))
        return 0
    q = report["int_vs_float"]
    print(f"held-out loss {report['heldout_loss']} nats/token (bigram {report['bigram_heldout_loss']})")
    print(f"integer path vs float on {q['tokens']} held-out tokens: perplexity {q['ppl_int']} vs "
          f"{q['ppl_float']} (ratio {q['ppl_ratio']}), top-1 agreement {q['top1_agreement']}, "
          f"mean KL {q['mean_kl']}")
    print("routing skew (share on the hottest 25% of experts) per layer: "
          + ", ".join(f"{v:.3f}" for v in report["routing_skew_hot25"]))
    c = report["coactivation"]
    print(f"same-depth draft candidates sharing >= {c['min_shared']} experts: "
          f"{c['candidate_fraction']:.3f} of candidates, {c['pair_fraction']:.3f} of pairs "
          f"({c['groups']} depth groups x layers)")
    return 0


def cmd_bench(args) -> int:
    """Benchmarks (minutes, not tests): the EMA controller's bus utilization on Verilator, or the
    golden model's expert dispatch."""
    if args.block == "dispatch":
        from .golden.dispatch_bench import measure_dispatch
        result = measure_dispatch(_load(args))
        if args.json:
            print(json.dumps(result, indent=2, sort_keys=True))
        else:
            r = result["tokens_per_second"]
            print(f"training tokens/s ({result['threads']} threads, {result['tokens_per_step']} "
                  f"tokens/step, {result['steps']} steps each, alternating): grouped dispatch "
                  f"{r['grouped']}, per-expert loop {r['loop']}: {result['speedup']}x")
        return 0
    from .cocotb_tests.ema import (UTILIZATION_CASES, UTILIZATION_LATENCIES, golden_mask_trace,
                                   run_utilization)
    from .blocks import ema_parameters
    from .contracts.mask_trace import read_mask_trace
    from .contracts.tools import build_root
    from .contracts.weight_layout import WeightLayout

    config = _load(args)
    layout = WeightLayout.for_model(config.model)
    hw = ema_parameters(config)
    log = (lambda *a: None) if args.json else print
    if args.trace:
        trace_file = Path(args.trace).resolve()  # the simulator runs in its own folder
    else:
        trace_file = build_root() / "bench" / "ema" / "golden_masks.json"
        golden_mask_trace(layout, hw, trace_file)
    trace = read_mask_trace(trace_file, layout)
    log(f"edgexpert bench ema: {hw['data_width']}-bit AXI, {hw['outstanding']} outstanding, "
        f"masks from {trace_file} (source: {trace.source}), verilator, seed {DEMO_SEED}")
    result = run_utilization(layout, hw, trace_file, seed=DEMO_SEED)
    runs = result.report["runs"]
    utilization = {case: {str(lat): runs[f"{case}/{lat}"]["utilization"]
                          for lat in UTILIZATION_LATENCIES} for case in UTILIZATION_CASES}
    sources = {case: runs[f"{case}/{UTILIZATION_LATENCIES[0]}"]["mask_source"]
               for case in UTILIZATION_CASES}
    summary = {"block": "ema", "simulator": "verilator", "seed": DEMO_SEED, "hardware": hw,
               "model": {k: getattr(layout, k) for k in ("n_layers", "n_experts", "d_model",
                                                          "expert_ffn", "n_shared_experts")},
               "peak_beats_per_cycle": 1.0, "utilization": utilization, "mask_source": sources,
               "trace_file": str(trace_file), "runs": runs}
    out = build_root() / "bench" / "ema" / "summary.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(summary, indent=2, sort_keys=True))
    if args.json:
        print(json.dumps(summary, indent=2, sort_keys=True))
        return 0
    print("utilization = R beats / busy cycles (AXI peak 1.0)")
    print(f"{'case':<10} {'masks':<20}" + "".join(f"  latency {lat:<4}"
                                                  for lat in UTILIZATION_LATENCIES))
    for case in UTILIZATION_CASES:
        print(f"{case:<10} {sources[case]:<20}"
              + "".join(f"  {utilization[case][str(lat)]:<12.4f}" for lat in UTILIZATION_LATENCIES))
    print(f"summary {out}")
    return 0


def _parser() -> argparse.ArgumentParser:
    from .blocks import BLOCKS

    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--config", metavar="FILE", help="YAML config over the bundled defaults")
    common.add_argument("--set", metavar="KEY=VALUE", action="append", default=[],
                        help="override one config value, e.g. hardware.mac_lane.pairs_per_beat=8")

    parser = argparse.ArgumentParser(prog="edgexpert", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("doctor", help="list every tool and library with its version")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=cmd_doctor)

    blocks = ", ".join(sorted(BLOCKS))
    p = sub.add_parser("rtl", parents=[common], help="write a block's RTLIL and Verilog")
    p.add_argument("block", metavar="BLOCK", help=f"one of: {blocks}")
    p.add_argument("--out", required=True, metavar="DIR", help="output folder")
    p.set_defaults(func=cmd_rtl)

    p = sub.add_parser("synth", parents=[common],
                       help="synthesize a block on osu018 (Yosys), time it and measure its power "
                            "(OpenSTA); --all: every block, with report and cost table")
    p.add_argument("block", metavar="BLOCK", nargs="?", help=f"one of: {blocks}")
    p.add_argument("--all", action="store_true",
                   help="every block: build/synth/report.md, report.json and costs.json")
    p.add_argument("--json", action="store_true",
                   help="print cells, area_um2, critical_path_ns, fmax_hz, power and more as JSON")
    p.set_defaults(func=cmd_synth)

    p = sub.add_parser("train", parents=[common],
                       help="train the golden MoE model on the standard library's source")
    where = p.add_mutually_exclusive_group()
    where.add_argument("--out", metavar="DIR", help="checkpoint folder (default build/train)")
    where.add_argument("--install", action="store_true",
                       help="replace the bundled checkpoint in golden/checkpoint/")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=cmd_train)

    p = sub.add_parser("prune", parents=[common],
                       help="EdgeXpert's pruning mask with recovery training: prune a checkpoint's "
                            "expert input channels and fine-tune the rest (docs/policies.md)")
    p.add_argument("--sparsity", type=float, required=True, metavar="S",
                   help="share of each expert's input channels pruned, in (0, 0.95]")
    p.add_argument("--steps", type=int, default=300, metavar="N",
                   help="recovery steps of train.batch_size x train.seq_len tokens (default 300; "
                        "0: masked, no recovery)")
    p.add_argument("--lr", type=float, default=3e-4, metavar="LR",
                   help="peak learning rate of the recovery (default 3e-4; warm-up over a tenth "
                        "of the steps, cosine decay)")
    p.add_argument("--checkpoint", metavar="DIR", help="parent checkpoint (default: bundled)")
    where = p.add_mutually_exclusive_group()
    where.add_argument("--out", metavar="DIR",
                       help="checkpoint folder (default build/prune/s<S>_n<N>)")
    where.add_argument("--install", action="store_true",
                       help="install as the bundled pruned checkpoint in golden/checkpoint_pruned/")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.add_argument("--json", action="store_true", help="print the held-out losses as JSON")
    p.set_defaults(func=cmd_prune)

    p = sub.add_parser("decode", parents=[common],
                       help="decode the bundled prompts autoregressively and speculatively")
    p.add_argument("--path", choices=["int", "float"], default="int",
                   help="the A8W4 integer path (default) or the float model")
    p.add_argument("--checkpoint", metavar="DIR", help="checkpoint folder (default: bundled)")
    p.add_argument("--prompts", metavar="FILE", help="prompt file (default: bundled)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--traces", metavar="FILE",
                   help="write the speculative runs' traces (.npz, docs/traces.md)")
    p.set_defaults(func=cmd_decode)

    p = sub.add_parser("compare", parents=[common],
                       help="every decoding policy side by side: traffic and quality")
    p.add_argument("--checkpoint", metavar="DIR", help="checkpoint folder (default: bundled)")
    p.add_argument("--json", action="store_true", help="print one JSON object keyed by policy")
    p.set_defaults(func=cmd_compare)

    p = sub.add_parser("ablate", parents=[common],
                       help="settings studies of the policies (calibration, ratio, budgets, ...)")
    p.add_argument("study", nargs="*", help="studies to run (docs/policies.md lists them; an "
                   "unknown name prints the accepted ones)")
    p.add_argument("--all", action="store_true", help="run every study")
    p.add_argument("--checkpoint", metavar="DIR", help="checkpoint folder (default: bundled)")
    p.add_argument("--json", action="store_true", help="print one JSON object keyed by study")
    p.set_defaults(func=cmd_ablate)

    p = sub.add_parser("prefill", parents=[common],
                       help="EdgeXpert's prefill token encoder: train it, or measure the ablation")
    prefill = p.add_subparsers(dest="prefill_command", required=True, metavar="ACTION")
    q = prefill.add_parser("train", parents=[common],
                           help="train the token-importance encoder (build/prefill/encoder)")
    q.add_argument("--install", action="store_true",
                   help="also copy it into golden/checkpoint/ (the bundled encoder)")
    q.add_argument("--steps", type=int, metavar="N", help="optimizer steps (default 1500)")
    q.add_argument("--checkpoint", metavar="DIR", help="checkpoint folder (default: bundled)")
    q.set_defaults(func=cmd_prefill_train)
    q = prefill.add_parser("ablate", parents=[common],
                           help="held-out prefill quality and bytes: k/n budgets, encoder vs "
                                "random classes, chunk sizes (build/prefill/ablate.json)")
    q.add_argument("--windows", type=int, default=24, metavar="N",
                   help="held-out prompt windows (default 24)")
    q.add_argument("--checkpoint", metavar="DIR", help="checkpoint folder (default: bundled)")
    q.add_argument("--front", type=float, metavar="MSE",
                   help="also measure the points of the last calibration's Pareto front with mse "
                        "<= MSE (how the calibration mse maps to the held-out perplexity ratio)")
    q.add_argument("--json", action="store_true", help="print one JSON object")
    q.set_defaults(func=cmd_prefill_ablate)

    p = sub.add_parser("calibrate", parents=[common],
                       help="calibrate a policy's settings on training-split text")
    p.add_argument("what", metavar="WHAT", choices=["prefill"],
                   help="prefill: EdgeXpert's thresholds and budgets (build/calibrate/prefill.json)")
    p.add_argument("--windows", type=int, default=32, metavar="N",
                   help="training-split prompt windows (default 32)")
    p.add_argument("--mse-bound", type=float, default=MSE_BOUND, metavar="X",
                   help=f"largest MoE output MSE relative to native top-K (default {MSE_BOUND}, "
                        "docs/policies.md)")
    p.add_argument("--checkpoint", metavar="DIR", help="checkpoint folder (default: bundled)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=cmd_calibrate)

    p = sub.add_parser("analyze", parents=[common],
                       help="integer vs float quality, routing skew, same-depth co-activation")
    p.add_argument("--checkpoint", metavar="DIR", help="checkpoint folder (default: bundled)")
    p.add_argument("--windows", type=int, default=16, metavar="N",
                   help="held-out windows for the integer-vs-float comparison (default 16)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=cmd_analyze)

    p = sub.add_parser("bench", parents=[common],
                       help="benchmarks: the EMA's bus utilization, the golden model's dispatch")
    p.add_argument("block", metavar="WHAT", choices=["ema", "dispatch"],
                   help="ema: AXI bus utilization; dispatch: the golden model's expert dispatch")
    p.add_argument("--trace", metavar="FILE",
                   help="mask trace (JSON, docs/blocks/ema.md) for the trace case; default: the "
                        "golden model's depth-coalesced masks on two bundled prompts")
    p.add_argument("--json", action="store_true",
                   help="print the summary (utilization by case and latency) as JSON")
    p.set_defaults(func=cmd_bench)

    p = sub.add_parser("demo", parents=[common],
                       help="the lane through every flow (RTL, cocotb on Icarus and Verilator, "
                            "synthesis, power), then the golden model decoding the bundled prompts")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    p.set_defaults(func=cmd_demo)
    return parser


def main(argv: list[str] | None = None) -> int:
    from .sim.runner import SimError
    from .contracts.tools import ToolError

    args = _parser().parse_args(argv)
    try:
        return args.func(args)
    except InputError as exc:
        print(f"edgexpert: error: {exc}", file=sys.stderr)
        return 2
    except (ToolError, SimError) as exc:
        print(f"edgexpert: error: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
