"""The golden model: `train`, `prune`, `decode`, `analyze` and `bench dispatch`."""

from __future__ import annotations

from pathlib import Path

from ..contracts.errors import InputError
from .common import (checkpoint_option, golden_inputs, load, print_json, prompt_options,
                     prompt_texts, quiet_requested, settings_options)

__all__ = ["register", "register_bench"]


def cmd_train(args) -> int:
    from ..support.tools import build_root
    from ..golden.lm.checkpoint import bundled_checkpoint_dir
    from ..golden.lm.train import train
    config = load(args)
    out = (bundled_checkpoint_dir(config.model.name) if args.install
           else Path(args.out or build_root() / "train"))
    meta = train(config, out, args.command_line, progress=not quiet_requested(args))
    print(f"checkpoint {out}: held-out loss {meta['heldout_loss']} nats/token (bigram baseline "
          f"{meta['bigram_heldout_loss']}), {meta['train_tokens_per_second']} tokens/s")
    return 0


def cmd_prune(args) -> int:
    from ..support.tools import build_root
    from ..golden.lm.prune import bundled_pruned_dir, check_sparsity, recover
    config = load(args)
    check_sparsity(args.sparsity)
    out = bundled_pruned_dir() if args.install else \
        Path(args.out or build_root() / "prune" / f"s{args.sparsity:g}_n{args.steps}")
    meta = recover(config, args.sparsity, args.steps, args.lr, out, args.command_line,
                   parent=args.checkpoint, progress=not quiet_requested(args))
    prune = meta["prune"]
    if args.json:
        print_json({"checkpoint": str(out), "sparsity": prune["sparsity"],
                    "steps": prune["steps"], "seed": meta["seed"],
                    "heldout_loss_parent": prune["parent_heldout_loss"],
                    "heldout_loss_masked": prune["masked_heldout_loss"],
                    "heldout_loss_recovered": meta["heldout_loss"],
                    "train_seconds": prune["train_seconds"]})
        return 0
    print(f"checkpoint {out}: sparsity {prune['sparsity']}, {prune['steps']} recovery steps "
          f"(seed {meta['seed']}); held-out loss {prune['parent_heldout_loss']} parent, "
          f"{prune['masked_heldout_loss']} masked, {meta['heldout_loss']} recovered nats/token")
    return 0


DECODE_ROWS = ["tokens_per_step", "acceptance_length", "experts_per_step",
               "draft_experts_per_step", "ema_bytes_per_token", "ema_bytes_per_token_verify",
               "ema_bytes_per_token_draft"]


def per_prompt(result: dict, prompts: list[list[int]], tokenizer) -> list[dict]:
    """A row per prompt: its tokens, the new tokens and steps of the speculative run, whether
    they equal greedy decoding's, and the prompt and generated text (the checkpoint's
    tokenizer)."""
    rows = []
    for ids, sd, same in zip(prompts, result["runs"]["naive_sd"], result["lossless_per_prompt"]):
        rows.append({"prompt_tokens": len(ids), "new_tokens": len(sd.tokens), "steps": sd.steps,
                     "tokens_per_step": round(len(sd.tokens) / sd.steps, 4), "lossless": same,
                     "prompt": tokenizer.decode(ids), "text": tokenizer.decode(sd.tokens)})
    return rows


#: what `decode`'s naive_sd drafts with ("draft": "self" in its JSON, as compare's draft column
#: names it); `compare`'s naive_sd drafts as policies.draft says, so their tokens per step differ
SELF_DRAFT = ("self-draft: the model's own layers with decode.draft_experts experts per token "
              "(`compare`'s naive_sd drafts as policies.draft says: the EAGLE head by default)")


def cmd_decode(args) -> int:
    config = load(args)
    if args.traces and args.path != "int":
        raise InputError("--traces needs the integer path (--path int): traces carry its exact "
                         "int8 inputs and outputs")
    from ..golden.decoding.decode import FloatEngine, compare_modes
    from ..golden.integer.int_model import quantize_model
    from ..contracts.trace import write_trace
    from ..golden.traces.decode_trace import build_trace
    ckpt, _, prompts, eot = golden_inputs(config, args.checkpoint, args.prompts,
                                          prompt_texts(args))
    engine = quantize_model(ckpt.model) if args.path == "int" else FloatEngine(ckpt.model)
    result = compare_modes(engine, prompts, config.decode, eot, keep_traces=bool(args.traces),
                           progress=not quiet_requested(args))
    if args.traces:
        trace = build_trace(result["runs"]["naive_sd"], ckpt.model.cfg, config.decode,
                            {"checkpoint": str(ckpt.path), "mode": "naive_sd",
                             "tokenizer_sha256": ckpt.meta.get("tokenizer_sha256")})
        write_trace(trace, Path(args.traces))
    rows = per_prompt(result, prompts, ckpt.tokenizer)
    if args.json:
        print_json({"path": args.path, "prompts": len(prompts), "seed": config.decode.seed,
                    "prompt_tokens": sum(r["prompt_tokens"] for r in rows),
                    "draft": "self", "ar": result["ar"], "naive_sd": result["naive_sd"],
                    "lossless": result["lossless"], "per_prompt": rows})
        return 0
    d = config.decode
    which = "user" if args.prompt or args.prompt_file else "held-out"
    print(f"edgexpert decode: {len(prompts)} {which} prompts "
          f"({sum(r['prompt_tokens'] for r in rows)} tokens), {args.path} path, "
          f"{d.max_new_tokens} new tokens each; draft: top-{d.draft_experts} experts, depth "
          f"{d.max_depth}, {d.max_candidates} candidates; seed {d.seed}")
    print(f"naive_sd here: {SELF_DRAFT}")
    print(f"{'':<28}{'ar':>14}{'naive_sd/self':>14}")
    for key in DECODE_ROWS:
        print(f"{key:<28}{result['ar'][key]:>14}{result['naive_sd'][key]:>14}")
    print(f"speculative output equals greedy decoding: {result['lossless']}")
    print(f"{'prompt':<8}{'tokens':>8}{'new':>6}{'steps':>7}{'tok/step':>10}{'lossless':>10}  "
          "generated text")
    for i, r in enumerate(rows, 1):
        print(f"{i:<8}{r['prompt_tokens']:>8}{r['new_tokens']:>6}{r['steps']:>7}"
              f"{r['tokens_per_step']:>10.2f}{str(r['lossless']):>10}  {r['text']!r}")
    if args.traces:
        print(f"traces: {args.traces}")
    return 0


def cmd_analyze(args) -> int:
    config = load(args)
    from ..golden.studies.analysis import coactivation, compare_paths, routing_skew
    from ..golden.decoding.decode import decode_speculative
    from ..golden.integer.int_model import quantize_model
    from ..golden.lm.train import eval_windows, token_streams
    from ..support.progress import phases, progress_bar
    ckpt, corpus, prompts, eot = golden_inputs(config, args.checkpoint)
    _, heldout = token_streams(corpus, ckpt.tokenizer)
    seq = ckpt.meta["eval"]["seq_len"]
    engine = quantize_model(ckpt.model)
    report = {"checkpoint": str(ckpt.path), "heldout_loss": ckpt.meta["heldout_loss"],
              "bigram_heldout_loss": ckpt.meta["bigram_heldout_loss"]}
    with phases("analyze", 3) as phase:
        phase(f"integer vs float on {args.windows} held-out windows")
        report["int_vs_float"] = compare_paths(ckpt.model, engine,
                                               eval_windows(heldout, seq, args.windows))
        phase("routing skew on the checkpoint's evaluation windows")
        report["routing_skew_hot25"] = routing_skew(ckpt.model, eval_windows(
            heldout, seq, ckpt.meta["eval"]["windows"]))
        phase(f"speculative decoding of {len(prompts)} prompts for the co-activation")
        runs = [decode_speculative(engine, p, config.decode, eot, keep_traces=True)
                for p in progress_bar(prompts, desc="analyze decode", unit="prompt")]
    report["coactivation"] = coactivation(runs)
    if args.json:
        print_json(report)
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


def cmd_bench_dispatch(args) -> int:
    """Training throughput of the golden model's grouped expert dispatch against the per-expert
    loop (golden/studies/dispatch_bench.py)."""
    config = load(args)
    from ..golden.studies.dispatch_bench import measure_dispatch
    result = measure_dispatch(config)
    if args.json:
        print_json(result)
        return 0
    r = result["tokens_per_second"]
    print(f"training tokens/s ({result['threads']} threads, {result['tokens_per_step']} "
          f"tokens/step, {result['steps']} steps each, alternating): grouped dispatch "
          f"{r['grouped']}, per-expert loop {r['loop']}: {result['speedup']}x")
    return 0


def register(sub) -> None:
    p = sub.add_parser("train", parents=[settings_options()],
                       help="train the golden MoE model on the standard library's source")
    where = p.add_mutually_exclusive_group()
    where.add_argument("--out", metavar="DIR", help="checkpoint folder (default build/train)")
    where.add_argument("--install", action="store_true",
                       help="replace the bundled checkpoint model.name names (golden/checkpoint/; "
                            "golden/checkpoint_fine/ with --set model.name=fine)")
    p.set_defaults(func=cmd_train)

    p = sub.add_parser("prune", parents=[settings_options()],
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
    p.add_argument("--json", action="store_true", help="print the held-out losses as JSON")
    p.set_defaults(func=cmd_prune)

    p = sub.add_parser("decode", parents=[settings_options()],
                       help="decode the bundled prompts autoregressively and speculatively")
    p.add_argument("--path", choices=["int", "float"], default="int",
                   help="the A8W4 integer path (default) or the float model")
    checkpoint_option(p)
    p.add_argument("--prompts", metavar="FILE",
                   help="JSON file naming held-out prompts (default: the bundled ones)")
    prompt_options(p)
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--traces", metavar="FILE",
                   help="write the speculative runs' traces (.npz, docs/traces.md)")
    p.set_defaults(func=cmd_decode)

    p = sub.add_parser("analyze", parents=[settings_options()],
                       help="integer vs float quality, routing skew, same-depth co-activation")
    checkpoint_option(p)
    p.add_argument("--windows", type=int, default=16, metavar="N",
                   help="held-out windows for the integer-vs-float comparison (default 16)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=cmd_analyze)


def register_bench(benches) -> None:
    p = benches.add_parser("dispatch", parents=[settings_options(1)],
                           help="the golden model's training throughput: grouped expert dispatch "
                                "against the per-expert loop (model.*, train.* settings)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=cmd_bench_dispatch)
