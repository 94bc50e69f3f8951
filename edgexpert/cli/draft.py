"""The EAGLE draft head: `draft train` (golden/decoding/eagle/, docs/golden-model.md)."""

from __future__ import annotations

from ..contracts.errors import InputError
from .common import checkpoint_option, golden_inputs, load, quiet_requested, settings_options

__all__ = ["register", "eagle_head"]


def eagle_head(ckpt, config, needed: bool = False):
    """The bundled EAGLE head for `ckpt`'s model when a policy may draft with it
    (policies.draft other than self, or `needed`), else None. A head trained for another
    checkpoint is refused in one line (golden.decoding.eagle.files.EagleError)."""
    if config.policies.draft == "self" and not needed:
        return None
    from ..golden.decoding.eagle.files import load_eagle
    return load_eagle(ckpt.model)[0]


def cmd_draft_train(args) -> int:
    """Train the EAGLE draft head for the checkpoint (golden/decoding/eagle/train.py)."""
    load(args)   # validated only: the head's settings are EagleSettings, not config keys
    if args.steps is not None and not 1 <= args.steps <= 1_000_000:
        raise InputError(f"--steps {args.steps} is out of range: accepted 1..1000000")
    if args.draft_vocab is not None and not 0 <= args.draft_vocab <= 1 << 20:
        raise InputError(f"--draft-vocab {args.draft_vocab} is out of range: accepted 0..1048576 "
                         "(0: the whole vocabulary)")
    import dataclasses

    import torch

    from ..support.tools import build_root
    from ..golden.decoding.eagle.files import bundled_eagle_dir, save_eagle
    from ..golden.decoding.eagle.head import EagleSettings
    from ..golden.decoding.eagle.train import train_eagle
    from ..golden.lm.train import token_streams
    # one thread: bit-identical reruns, and the other core stays free
    torch.set_num_threads(1)
    ckpt, corpus, _, _ = golden_inputs(args.checkpoint)
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
        save_eagle(head, meta, bundled_eagle_dir())
        installed = f" (installed in {bundled_eagle_dir()})"
    print(f"eagle draft head {out}{installed}: {meta['parameters']} parameters, "
          f"{meta['draft_pass_bytes']} B per draft pass, held-out top-1 agreement "
          f"{meta['heldout_top1']} per unroll step, {meta['train_seconds']} s, seed {settings.seed}")
    return 0


def register(sub) -> None:
    p = sub.add_parser("draft", parents=[settings_options(0)],
                       help="the EAGLE draft head of the speculative policies: train it")
    draft = p.add_subparsers(dest="draft_command", required=True, metavar="ACTION")
    q = draft.add_parser("train", parents=[settings_options(1)],
                         help="train the EAGLE draft head (build/draft/eagle); its settings are "
                              "golden/decoding/eagle/head.py's EagleSettings, so --config and "
                              "--set are only validated")
    q.add_argument("--install", action="store_true",
                   help="also copy it into golden/checkpoint/eagle/ (the bundled head)")
    q.add_argument("--steps", type=int, metavar="N", help="optimizer steps (default 600)")
    q.add_argument("--draft-vocab", type=int, metavar="N",
                   help="draft vocabulary: the N most frequent training tokens (default 1024; "
                        "0: the target's whole vocabulary)")
    checkpoint_option(q)
    q.set_defaults(func=cmd_draft_train)
