"""`trace --hf DIR`: a Hugging Face MoE checkpoint decodes the user's prompts plainly and with
naive speculative decoding, and its measured passes are kept for the performance model
(`edgexpert estimate --measured build/trace/NAME/measured.json`: routing "trace" instead of
synthetic for that model)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from ..contracts.errors import InputError
from .common import load, print_json, prompt_options, prompt_texts, settings_options, write_result

__all__ = ["register"]


def cmd_trace(args) -> int:
    config = load(args)
    from ..golden.decoding.decode import FloatEngine, decode_ar, decode_speculative, summarize
    from ..golden.lm.hf_loader import load_hf_checkpoint, load_hf_tokenizer
    from ..golden.lm.prompts import text_prompts
    from ..sim.perf.models import spec_from_config

    folder = Path(args.hf)
    texts = prompt_texts(args)
    if not texts:
        raise InputError("a checkpoint's own text is needed: accepted --prompt TEXT (repeatable) "
                         "or --prompt-file FILE")
    model = load_hf_checkpoint(folder).eval()
    tokenizer = load_hf_tokenizer(folder)
    decode = config.decode
    room = model.cfg.max_seq_len - decode.max_new_tokens - decode.max_depth
    prompts = text_prompts(texts, tokenizer, max(room, 0))
    name = args.name or folder.resolve().name
    spec = spec_from_config(
        name, f"{folder.resolve()}/config.json (traced by `edgexpert trace --hf`)", model.cfg)
    engine = FloatEngine(model)
    if not args.json:   # --json: stdout holds the JSON alone
        print(f"edgexpert trace: {folder} ({model.cfg.n_layers} layers, "
              f"{model.cfg.n_experts} experts, top-{model.cfg.top_k}), {len(prompts)} prompts x "
              f"{decode.max_new_tokens} new tokens, float path, greedy")
    runs = {"ar": [decode_ar(engine, p, decode) for p in prompts],
            "naive_sd": [decode_speculative(engine, p, decode) for p in prompts]}
    policies = {k: summarize(v) for k, v in runs.items()}
    lossless = all(a.tokens == s.tokens for a, s in zip(runs["ar"], runs["naive_sd"]))
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
              "bytes/token")
    print(f"  speculative output equal to greedy: {lossless}")
    print(f"measured passes {path}\nnext: edgexpert estimate --measured {path} --model {name}")
    return 0


def register(sub) -> None:
    p = sub.add_parser("trace", parents=[settings_options()],
                       help="a Hugging Face MoE checkpoint decodes your prompts; its measured "
                            "passes drive `edgexpert estimate --measured`")
    p.add_argument("--hf", required=True, metavar="DIR",
                   help="a checkpoint folder: config.json, *.safetensors, tokenizer.json "
                        "(OLMoE, Qwen3-MoE or Mixtral naming)")
    p.add_argument("--name", help="the model's name in the results (default: the folder's)")
    prompt_options(p)
    p.add_argument("--json", action="store_true", help="print the measured runs as JSON")
    p.set_defaults(func=cmd_trace)
