"""The EAGLE draft head: `draft train` (golden/decoding/eagle/, docs/golden-model.md)."""

from __future__ import annotations

from ..contracts.errors import InputError
from .common import checkpoint_option, golden_inputs, load, quiet_requested, settings_options

__all__ = ["register", "eagle_head"]


def eagle_head(ckpt, config, needed: bool = False):
    """The EAGLE head beside `ckpt` (its eagle/ folder) when a policy may draft with it
    (policies.draft other than self, or `needed`), else None. A head trained for another
    checkpoint is refused in one line (golden.decoding.eagle.files.EagleError)."""
    if config.policies.draft == "self" and not needed:
        return None
    from ..golden.decoding.eagle.files import load_eagle
    return load_eagle(ckpt.model, ckpt.path / "eagle")[0]


def cmd_draft_train(args) -> int:
    """Train the EAGLE draft head for the checkpoint (golden/decoding/eagle/train.py)."""
    # the head's settings are EagleSettings, not config keys: the config names the model
    config = load(args)
    if args.steps is not None and not 1 <= args.steps <= 1_000_000:
        raise InputError(f"--steps {args.steps} is out of range: accepted 1..1000000")
    if args.draft_vocab is not None and not 0 <= args.draft_vocab <= 1 << 20:
        raise InputError(f"--draft-vocab {args.draft_vocab} is out of range: accepted 0..1048576 "
                         "(0: the whole vocabulary)")
    import dataclasses

    import torch

    from ..support.tools import build_root
    from ..golden.decoding.eagle.files import save_eagle
    from ..golden.decoding.eagle.head import EagleSettings
    from ..golden.decoding.eagle.train import train_eagle
    from ..golden.lm.train import token_streams
    # one thread: bit-identical reruns, and the other core stays free
    torch.set_num_threads(1)
    ckpt, corpus, _, _ = golden_inputs(config, args.checkpoint)
    if ckpt.model.cfg.n_layers < 4:
        raise InputError(f"the checkpoint has {ckpt.model.cfg.n_layers} layers: the head fuses "
                         "layers 0, 1 and 3, accepted models of at least 4 layers")
    train_stream, heldout_stream = token_streams(corpus, ckpt.tokenizer)
    changes = {key: value for key, value in (("steps", args.steps),
                                              ("draft_vocab", args.draft_vocab))
               if value is not None}
    settings = dataclasses.replace(EagleSettings(), **changes)
    head, meta = train_eagle(ckpt.model, train_stream, heldout_stream, settings,
                             progress=not quiet_requested(args))
    meta["command"] = args.command_line
    out = build_root() / "draft" / "eagle"
    save_eagle(head, meta, out)
    installed = ""
    if args.install:
        # a head sits next to the checkpoint it drafts for (load_eagle checks it is that one)
        save_eagle(head, meta, ckpt.path / "eagle")
        installed = f" (installed in {ckpt.path / 'eagle'})"
    print(f"eagle draft head {out}{installed}: {meta['parameters']} parameters, "
          f"{meta['draft_pass_bytes']} B per draft pass, held-out top-1 agreement "
          f"{meta['heldout_top1']} per unroll step, {meta['train_seconds']} s, seed {settings.seed}")
    return 0


def register(sub) -> None:
    p = sub.add_parser("draft", parents=[settings_options(0)],
                       help="the EAGLE draft head of the speculative policies: `draft train`")
    draft = p.add_subparsers(dest="draft_command", required=True, metavar="ACTION")
    q = draft.add_parser("train", parents=[settings_options(1)],
                         help="train the EAGLE draft head (build/draft/eagle); its settings are "
                              "golden/decoding/eagle/head.py's EagleSettings, so --config and "
                              "--set only name the model (model.name)")
    q.add_argument("--install", action="store_true",
                   help="also copy it into the checkpoint's eagle/ folder (the bundled "
                        "model's: golden/checkpoint/eagle/ or golden/checkpoint_fine/eagle/)")
    q.add_argument("--steps", type=int, metavar="N", help="optimizer steps (default 600)")
    q.add_argument("--draft-vocab", type=int, metavar="N",
                   help="draft vocabulary: the N most frequent training tokens (default 1024; "
                        "0: the target's whole vocabulary)")
    checkpoint_option(q)
    q.set_defaults(func=cmd_draft_train)
