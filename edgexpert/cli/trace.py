"""`trace --hf DIR`: a Hugging Face MoE checkpoint decodes the user's prompts under every golden
policy (or those named), and its measured passes are kept for the performance model
(`edgexpert estimate --measured build/trace/NAME/measured.json`: routing "trace" instead of
synthetic for that model, every policy priced from the checkpoint's own routing). `hf tiny
DIR`: a small OLMoE / Qwen3-MoE / Mixtral-shaped checkpoint to try it on
(golden/lm/hf_tiny.py)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from ..contracts.errors import InputError
from .common import (DEMO_SEED, load, print_json, prompt_options, prompt_texts, quiet_requested,
                     settings_options, write_result)

__all__ = ["register"]


def cmd_trace(args) -> int:
    config = load(args)
    from ..contracts.weight_layout import WeightLayout
    from ..golden.decoding.decode import FloatEngine, decode_ar
    from ..golden.lm.hf_loader import load_hf_checkpoint, load_hf_tokenizer
    from ..golden.lm.prompts import text_prompts
    from ..golden.policies.registry import COMPARED, build_policy
    from ..golden.studies.evaluate import run_policy
    from ..sim.perf.models import spec_from_config
    from ..support.progress import progress_bar

    folder = Path(args.hf)
    texts = prompt_texts(args)
    if not texts:
        raise InputError("a checkpoint's own text is needed: accepted --prompt TEXT (repeatable) "
                         "or --prompt-file FILE")
    unknown = [p for p in args.policy or [] if p not in COMPARED]
    if unknown:
        raise InputError(f"--policy {unknown[0]} is not known: accepted {', '.join(COMPARED)}")
    # plain decoding is every policy's reference (greedy match) and naive_sd the baseline
    names = [p for p in COMPARED if p in {"ar", "naive_sd", *(args.policy or COMPARED)}]
    model = load_hf_checkpoint(folder).eval()
    tokenizer = load_hf_tokenizer(folder)
    decode = config.decode
    room = model.cfg.max_seq_len - decode.max_new_tokens - decode.max_depth
    prompts = text_prompts(texts, tokenizer, max(room, 0))
    name = args.name or folder.resolve().name
    spec = spec_from_config(
        name, f"{folder.name}/config.json (traced by `edgexpert trace --hf`)", model.cfg)
    engine = FloatEngine(model)
    layout = WeightLayout.for_model(model.cfg)
    if not args.json:   # --json: stdout holds the JSON alone
        print(f"edgexpert trace: {folder.name} ({model.cfg.n_layers} layers, "
              f"{model.cfg.n_experts} experts, top-{model.cfg.top_k}), {len(prompts)} prompts x "
              f"{decode.max_new_tokens} new tokens, float path, greedy; {len(names)} policies, "
              "each drafting with the model's own layers (a checkpoint has no EAGLE head), "
              "EdgeXpert's prefill on the model's routing (no prefill encoder)")
    reference = [decode_ar(engine, p, decode) for p in prompts]
    policies = {}
    for policy_name in progress_bar(names, desc="trace", unit="policy",
                                    enabled=not quiet_requested(args)):
        policy = build_policy(policy_name, config, model, layout, draft="self")
        own = engine if policy.model is None else FloatEngine(policy.model)
        policies[policy_name] = {**run_policy(own, policy, prompts, reference, None),
                                 "draft": policy.draft, "onchip": policy.onchip}
    lossless = policies["naive_sd"]["greedy_sequence_match"] == 1.0
    data = {"model": name, "spec": dataclasses.asdict(spec), "policies": policies,
            "prompts": len(prompts), "lossless": lossless,
            "decode": dataclasses.asdict(decode)}
    path = write_result(data, "trace", name, "measured.json")
    if args.json:
        print_json(data)
        return 0
    for policy, m in policies.items():
        print(f"  {policy:<9} {m['tokens_per_step']:.2f} tokens/step, "
              f"{m['passes_per_token']:.2f} passes/token, {m['ema_bytes_per_token']:,} expert "
              f"bytes/token, greedy output reproduced {m['greedy_sequence_match']:.0%}")
    print(f"  naive speculative output equal to greedy: {lossless}")
    print(f"measured passes {path}\nnext: edgexpert estimate --measured {path} --model {name}")
    return 0


def cmd_hf_tiny(args) -> int:
    from ..golden.lm.hf_tiny import TINY, write_tiny_checkpoint
    try:
        folder = write_tiny_checkpoint(Path(args.dir), args.kind, args.seed)
    except FileExistsError as exc:
        raise InputError(f"{exc}: accepted a new or empty folder") from None
    s = TINY
    print(f"checkpoint {folder}: {args.kind}, {s.layers} layers, d_model {s.d_model}, "
          f"{s.experts} experts of width {s.expert_ffn}, top-{s.top_k}, vocabulary {s.vocab} "
          f"(w0 .. w{s.vocab - 2}), random weights (seed {args.seed})\n"
          f"next: edgexpert trace --hf {folder} --prompt \"w1 w2 w3 w4\"")
    return 0


def register(sub) -> None:
    from ..golden.lm.hf_tiny import KINDS
    p = sub.add_parser("trace", parents=[settings_options()],
                       help="a Hugging Face MoE checkpoint decodes your prompts under every "
                            "policy; its measured passes drive `edgexpert estimate --measured`")
    p.add_argument("--hf", required=True, metavar="DIR",
                   help="a checkpoint folder: config.json, *.safetensors, tokenizer.json "
                        "(OLMoE, Qwen3-MoE or Mixtral naming)")
    p.add_argument("--name", help="the model's name in the results (default: the folder's)")
    p.add_argument("--policy", action="append", metavar="NAME",
                   help="a policy to measure (repeatable; ar and naive_sd always run; "
                        "default: all eight)")
    prompt_options(p)
    p.add_argument("--json", action="store_true", help="print the measured runs as JSON")
    p.set_defaults(func=cmd_trace)

    p = sub.add_parser("hf", help="Hugging Face checkpoints: `hf tiny` DIR writes a small one")
    hf = p.add_subparsers(dest="hf_command", required=True, metavar="WHAT")
    p = hf.add_parser("tiny", parents=[settings_options(1)],
                      help="write a tiny MoE checkpoint (random weights, fixed seed) to try "
                           "`trace --hf` and `estimate --measured` on")
    p.add_argument("dir", metavar="DIR", help="the folder to write (new or empty)")
    p.add_argument("--kind", choices=KINDS, default=KINDS[0],
                   help=f"the architecture's naming (default {KINDS[0]})")
    p.add_argument("--seed", type=int, default=DEMO_SEED,
                   help=f"the weights' seed (default {DEMO_SEED})")
    p.set_defaults(func=cmd_hf_tiny)
