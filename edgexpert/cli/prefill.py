"""EdgeXpert's prefill: `prefill train` (the token encoder), `prefill ablate` and
`calibrate prefill` (golden/policies/prefill.py, golden/studies/prefill_calibration.py, docs/policies.md)."""

from __future__ import annotations

import dataclasses
import json

from ..contracts.errors import InputError
from .common import checkpoint_option, golden_inputs, load, publish, settings_options

__all__ = ["MSE_BOUND", "register", "chosen_settings"]

#: `edgexpert calibrate prefill`'s MSE bound: docs/policies.md says how it was fixed
MSE_BOUND = 0.012


def cmd_prefill_train(args) -> int:
    """Train EdgeXpert's prefill token encoder for the bundled checkpoint (golden/policies/prefill.py)."""
    # the encoder's settings are EncoderSettings, not config keys: the config names the model
    config = load(args)
    if args.steps is not None and not 1 <= args.steps <= 1_000_000:
        raise InputError(f"--steps {args.steps} is out of range: accepted 1..1000000")
    import torch

    from ..support.tools import build_root
    from ..golden.policies.prefill import EncoderSettings, save_encoder, train_encoder
    from ..golden.lm.train import token_streams
    # one thread: bit-identical reruns, and the other core stays free
    torch.set_num_threads(1)
    ckpt, corpus, _, _ = golden_inputs(config, args.checkpoint)
    train_stream, heldout_stream = token_streams(corpus, ckpt.tokenizer)
    settings = EncoderSettings(steps=args.steps) if args.steps else EncoderSettings()
    encoder, meta = train_encoder(ckpt.model, train_stream, heldout_stream, settings)
    meta["command"] = args.command_line
    meta["checkpoint"] = str(ckpt.path)
    out = build_root() / "prefill" / "encoder"
    save_encoder(encoder, meta, out)
    installed = ""
    if args.install:
        # the bundled encoder sits next to the bundled model it was trained for
        save_encoder(encoder, meta, ckpt.path)
        installed = f" (installed in {ckpt.path})"
    print(f"prefill encoder {out}{installed}: held-out Spearman {meta['heldout_spearman']} over "
          f"{meta['heldout_windows']} windows, {meta['train_seconds']} s, seed {settings.seed}")
    return 0


def _prompt_windows(stream, config, count: int) -> list[list[int]]:
    """`count` windows of policies.eval_prompt_tokens tokens spread evenly over `stream`."""
    from ..golden.lm.train import eval_windows
    return [w.tolist() for w in eval_windows(stream, config.policies.eval_prompt_tokens - 1, count)]


def _check_windows(count: int) -> None:
    if not 1 <= count <= 10_000:
        raise InputError(f"--windows {count} is out of range: accepted 1..10000")


def _heldout_inputs(args, config):
    """What the held-out prefill studies measure on: (float engine, checkpoint, the bundled
    prefill encoder, `args.windows` held-out prompt windows), torch on one thread."""
    import torch

    from ..golden.decoding.decode import FloatEngine
    from ..golden.policies.prefill import load_encoder
    from ..golden.lm.train import token_streams
    torch.set_num_threads(1)
    ckpt, corpus, _, _ = golden_inputs(config, args.checkpoint)
    encoder, _ = load_encoder(ckpt.model, ckpt.path)
    _, heldout = token_streams(corpus, ckpt.tokenizer)
    return FloatEngine(ckpt.model), ckpt, encoder, _prompt_windows(heldout, config, args.windows)


def chosen_settings(point: dict) -> str:
    """A calibration point as --set options, pasteable onto any command line."""
    keys = ("tau_major", "tau_minor", "budget_minor", "budget_trivial")
    return " ".join(f"--set policies.prefill.{key}={point[key]}" for key in keys)


def cmd_calibrate(args) -> int:
    """Sweep EdgeXpert's prefill thresholds and budgets on training-split windows and choose the
    operating point (golden/studies/prefill_calibration.py)."""
    config = load(args)
    _check_windows(args.windows)
    if not 0 < args.mse_bound < 1:
        raise InputError(f"--mse-bound {args.mse_bound} is out of range: accepted (0, 1)")
    import torch

    from ..golden.policies.prefill import load_encoder
    from ..golden.studies.prefill_calibration import choose, default_grid, pareto_front, sweep
    from ..golden.lm.train import token_streams
    torch.set_num_threads(1)
    ckpt, corpus, _, _ = golden_inputs(config, args.checkpoint)
    encoder, _ = load_encoder(ckpt.model, ckpt.path)
    train_stream, _ = token_streams(corpus, ckpt.tokenizer)
    # prefill bodies: a prompt of eval_prompt_tokens minus its last token (the first root)
    windows = torch.tensor(_prompt_windows(train_stream, config, args.windows))[:, :-1]
    chunk = config.policies.prefill.chunk
    points = sweep(ckpt.model, encoder, windows, chunk, default_grid(ckpt.model.cfg.top_k))
    front = pareto_front(points)
    chosen = choose(points, args.mse_bound)
    native = next(p for p in points if p["tau_major"] == 0)   # every token major
    report = {"windows": len(windows), "split": "train", "prompt_tokens": windows.shape[1],
              "chunk": chunk, "mse_bound": args.mse_bound, "rule": "fewest bytes_per_token on the "
              "Pareto front of (bytes_per_token, mse) with mse <= mse_bound",
              "native_bytes_per_token": native["bytes_per_token"], "chosen": chosen,
              "front": front, "points": points}

    def table(path) -> None:
        print(f"edgexpert calibrate prefill: {len(points)} settings on {len(windows)} "
              f"training-split windows of {windows.shape[1]} tokens, chunk {chunk}; native top-"
              f"{ckpt.model.cfg.top_k}: {native['bytes_per_token']} B/token")
        print("Pareto front (bytes/token vs MoE output MSE relative to native top-K):")
        print(f"{'tau_major':>10}{'tau_minor':>10}{'k':>3}{'n':>3}{'mse':>10}{'experts/tok':>12}"
              f"{'B/token':>9}{'vs native':>10}")
        for p in front:
            mark = "  <- chosen" if p is chosen else ""
            print(f"{p['tau_major']:>10}{p['tau_minor']:>10}{p['budget_minor']:>3}"
                  f"{p['budget_trivial']:>3}{p['mse']:>10.5f}{p['experts_per_token']:>12.3f}"
                  f"{p['bytes_per_token']:>9}"
                  f"{p['bytes_per_token'] / native['bytes_per_token'] - 1:>+10.1%}{mark}")
        print(f"chosen (fewest bytes with mse <= {args.mse_bound}): {chosen_settings(chosen)}")
        print(f"table: {path}")

    publish(args, report, ("calibrate", "prefill.json"), table)
    return 0


def cmd_prefill_ablate(args) -> int:
    """EdgeXpert's prefill on held-out windows: k/n budgets, encoder vs random classes, chunk."""
    from ..support.tools import build_root
    config = load(args)
    _check_windows(args.windows)
    if args.front is not None and not 0 < args.front < 1:
        raise InputError(f"--front {args.front} is out of range: accepted (0, 1)")
    front = []
    if args.front:
        calibration = build_root() / "calibrate" / "prefill.json"
        if not calibration.is_file():
            raise InputError(f"--front needs {calibration}: run `edgexpert calibrate prefill` first")
        front = [q for q in json.loads(calibration.read_text())["front"]
                 if q["mse"] <= args.front]
    from ..golden.studies.prefill_calibration import ablate
    engine, ckpt, encoder, windows = _heldout_inputs(args, config)
    p = config.policies
    log = (lambda *a: None) if args.json else print   # --json: stdout holds the JSON alone
    log(f"edgexpert prefill ablate: {len(windows)} held-out windows of {len(windows[0])} tokens, "
        f"float path; tau_major {p.prefill.tau_major}, tau_minor {p.prefill.tau_minor}, "
        f"chunk {p.prefill.chunk}; random classes seed {p.prefill.seed}")
    result = ablate(engine, ckpt.model, encoder, windows, p, config.decode, front, log=log)
    report = {"windows": len(windows), "split": "heldout", "settings": dataclasses.asdict(p),
              **result}
    publish(args, report, ("prefill", "ablate.json"), lambda path: print(f"table: {path}"))
    return 0


def cmd_prefill_encoders(args) -> int:
    """The configured prefill point with the float encoder and its A8W4 integer twin."""
    config = load(args)
    _check_windows(args.windows)
    from ..golden.studies.prefill_calibration import compare_encoders
    engine, ckpt, encoder, windows = _heldout_inputs(args, config)
    p = config.policies
    result = compare_encoders(engine, ckpt.model, encoder, windows, p, config.decode)
    report = {"windows": len(windows), "split": "heldout", "model_path": "float",
              "settings": dataclasses.asdict(p), **result}

    def table(path) -> None:
        print(f"edgexpert prefill encoders: {len(windows)} held-out windows, "
              f"{result['prompt_tokens']} prefill tokens, float model path, chunk "
              f"{p.prefill.chunk}; tau {p.prefill.tau_major}/{p.prefill.tau_minor}, "
              f"k {p.prefill.budget_minor}, n {p.prefill.budget_trivial}")
        moves = ", ".join(f"{k} {v}" for k, v in result["class_moves"].items()) or "none"
        print(f"tokens changing class (int vs float encoder): {result['class_changes']} ({moves})")
        print(f"{'encoder':<8}{'B/token':>9}{'native':>9}{'vs native':>11}{'ppl ratio':>11}")
        for name, row in result["paths"].items():
            print(f"{name:<8}{row['prefill_bytes_per_token']:>9}"
                  f"{row['native_prefill_bytes_per_token']:>9}"
                  f"{-row['prefill_bytes_reduction']:>+11.1%}{row['ppl_ratio']:>11}")
        print(f"table: {path}")

    publish(args, report, ("prefill", "encoders.json"), table)
    return 0


def register(sub) -> None:
    # settings may come before the action (`prefill --set K=V ablate`) or after it; both apply
    p = sub.add_parser("prefill", parents=[settings_options(0)],
                       help="EdgeXpert's prefill token encoder: `prefill train`, `prefill ablate` (the "
                            "ablation), `prefill encoders` (float against integer)")
    prefill = p.add_subparsers(dest="prefill_command", required=True, metavar="ACTION")
    q = prefill.add_parser("train", parents=[settings_options(1)],
                           help="train the token-importance encoder (build/prefill/encoder); its "
                                "settings are golden/policies/prefill.py's EncoderSettings, so "
                                "--config and --set only name the model (model.name)")
    q.add_argument("--install", action="store_true",
                   help="also copy it next to the checkpoint it was trained for (the "
                        "bundled model's folder, golden/checkpoint/ or golden/checkpoint_fine/)")
    q.add_argument("--steps", type=int, metavar="N", help="optimizer steps (default 1500)")
    checkpoint_option(q)
    q.set_defaults(func=cmd_prefill_train)
    q = prefill.add_parser("ablate", parents=[settings_options(1)],
                           help="held-out prefill quality and bytes: k/n budgets, encoder vs "
                                "random classes, chunk sizes (build/prefill/ablate.json)")
    q.add_argument("--windows", type=int, default=24, metavar="N",
                   help="held-out prompt windows (default 24)")
    checkpoint_option(q)
    q.add_argument("--front", type=float, metavar="MSE",
                   help="also measure the points of the last calibration's Pareto front with mse "
                        "<= MSE (how the calibration mse maps to the held-out perplexity ratio)")
    q.add_argument("--json", action="store_true", help="print one JSON object")
    q.set_defaults(func=cmd_prefill_ablate)
    q = prefill.add_parser("encoders", parents=[settings_options(1)],
                           help="held-out prefill with the float encoder and its A8W4 integer "
                                "twin: tokens changing class, bytes, perplexity ratio "
                                "(build/prefill/encoders.json)")
    q.add_argument("--windows", type=int, default=8, metavar="N",
                   help="held-out prompt windows (default 8)")
    checkpoint_option(q)
    q.add_argument("--json", action="store_true", help="print one JSON object")
    q.set_defaults(func=cmd_prefill_encoders)

    p = sub.add_parser("calibrate", parents=[settings_options()],
                       help="`calibrate prefill`: EdgeXpert's prefill thresholds and budgets on "
                            "training-split text")
    p.add_argument("what", metavar="WHAT", choices=["prefill"],
                   help="prefill: EdgeXpert's thresholds and budgets (build/calibrate/prefill.json)")
    p.add_argument("--windows", type=int, default=32, metavar="N",
                   help="training-split prompt windows (default 32)")
    p.add_argument("--mse-bound", type=float, default=MSE_BOUND, metavar="X",
                   help=f"largest MoE output MSE relative to native top-K (default {MSE_BOUND}, "
                        "docs/policies.md)")
    checkpoint_option(p)
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=cmd_calibrate)
