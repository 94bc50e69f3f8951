"""What every command shares: the settings options and the configuration they resolve to, the
golden model's inputs, and the one way a result is written under build/ and shown."""

from __future__ import annotations

import argparse
import dataclasses
import json
from pathlib import Path
from typing import Callable

from ..contracts.config import Config, load_config
from ..contracts.errors import InputError

__all__ = ["DEMO_SEED", "LEVELS", "QUICK", "settings_options", "quiet_requested", "load",
           "changed_settings", "settings_note", "checkpoint_option", "prompt_options", "prompt_texts", "golden_inputs",
           "waves_option", "print_json", "write_result", "publish"]

#: the project's seed (configs/default.yaml's train, decode and synth.activity seeds): the
#: demo's and the EMA bench's stimulus
DEMO_SEED = 20261129

#: command-line levels that take settings: `prefill --set K=V ablate --set K=V` (0 and 1)
LEVELS = 2

#: `--quick` on the long studies (compare, ablate): fewer new tokens per prompt and fewer
#: held-out windows, applied before the user's own --set (docs/getting-started.md)
QUICK = ("decode.max_new_tokens=32", "policies.eval_windows=4")


def settings_options(level: int = 0) -> argparse.ArgumentParser:
    """A parent parser with --config and --set for one level of the command line. Each level
    keeps its own destinations (config_0, set_0, ...): argparse copies every value a subcommand
    parses, defaults included, over its parent's, so one shared name lost the parent's
    `prefill --set K=V ablate`. `load` merges the levels."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--config", dest=f"config_{level}", metavar="FILE",
                        help="YAML config over the bundled defaults (one file per command)")
    common.add_argument("--set", dest=f"set_{level}", metavar="KEY=VALUE", action="append",
                        default=[], help="override one config value, e.g. "
                        "hardware.mac_lane.pairs_per_beat=8 (repeatable, applied in the order "
                        "given)")
    common.add_argument("--quiet", dest=f"quiet_{level}", action="store_true",
                        help="no progress bars (they go to stderr, and only on a terminal)")
    return common


def quiet_requested(args) -> bool:
    """--quiet at any level of the command line (`edgexpert --quiet compare`, `compare
    --quiet`, `prefill --quiet train`)."""
    return any(getattr(args, f"quiet_{level}", False) for level in (*range(LEVELS), "top"))


def config_sources(args) -> tuple[str | None, list[str]]:
    """The --config file (or None) and the settings (--quick's, then every --set) a command
    was given, before loading: `load` and the sweep's grid points start from them."""
    files = [f for f in (getattr(args, f"config_{i}", None) for i in range(LEVELS)) if f]
    if len(files) > 1:
        raise InputError(f"--config given twice ({files[0]} and {files[1]}): accepted one file; "
                         "add single values with --set")
    sets = [s for i in range(LEVELS) for s in getattr(args, f"set_{i}", [])]
    quick = list(QUICK) if getattr(args, "quick", False) else []
    return (files[0] if files else None), quick + sets


def load(args) -> Config:
    """The configuration a command runs with: the bundled defaults, the --config file (from
    whichever level named it), --quick's settings, then every --set, outer level first; all of
    it validated (bad values: InputError naming the range)."""
    from ..support.provenance import note_settings
    path, overrides = config_sources(args)
    config = load_config(path, overrides)
    note_settings(changed_settings(config))
    return config


def _flat(data: dict, prefix: str = "") -> dict:
    out = {}
    for key, value in data.items():
        if isinstance(value, dict):
            out.update(_flat(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


def changed_settings(config: Config, named_model: bool = False) -> list[str]:
    """`key=value` for every setting of `config` that differs from the bundled defaults (with
    `named_model`: from the defaults of the bundled model `model.name` names, configs/<name>.yaml
    included, so its own shape and training settings are not changes)."""
    base = load_config(overrides=[f"model.name={config.model.name}"] if named_model else [])
    mine, bundled = _flat(dataclasses.asdict(config)), _flat(dataclasses.asdict(base))
    return [f"{key}={value}" for key, value in mine.items() if value != bundled[key]]


def settings_note(config: Config) -> str:
    """What a result's title says about its settings: which ones differ from the defaults."""
    changed = changed_settings(config)
    return f"settings: {', '.join(changed)}" if changed else "bundled settings"


def checkpoint_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--checkpoint", metavar="DIR", help="checkpoint folder (default: bundled)")


def waves_option(parser: argparse.ArgumentParser) -> None:
    """--waves on every command that simulates RTL (`edgexpert.cocotb_tests.runner.run_cocotb`)."""
    parser.add_argument("--waves", action="store_true",
                        help="record waves: one VCD file per simulated case under build/sim/, "
                             "its path printed on stderr")


def prompt_options(parser: argparse.ArgumentParser) -> None:
    """The user's own prompts, instead of the bundled held-out ones."""
    parser.add_argument("--prompt", action="append", metavar="TEXT", default=[],
                        help="decode this text (repeatable)")
    parser.add_argument("--prompt-file", metavar="FILE",
                        help="decode the prompts of a UTF-8 text file, separated by lines "
                             "holding only ---")


def prompt_texts(args) -> list[str]:
    """The user's own prompts: --prompt-file's, then every --prompt (none: the bundled ones)."""
    from ..golden.lm.prompts import read_prompt_file
    texts = read_prompt_file(args.prompt_file) if args.prompt_file else []
    return texts + args.prompt


def golden_inputs(config: Config, checkpoint: str | None = None, prompts: str | None = None,
                  texts: list[str] = ()):
    """What the decoding commands start from: (checkpoint, corpus, prompts, end-of-text id). The
    checkpoint is the folder `checkpoint` when given, else the bundled model `model.name`
    names (of the configuration's shape). The prompts are `texts` tokenized when given (each
    must leave room in the context for the new tokens and draft tree of `config.decode`), else
    those of the `prompts` JSON file or the bundled ones."""
    from ..golden.lm.checkpoint import load_bundled, load_checkpoint
    from ..golden.lm.corpus import load_corpus
    from ..golden.lm.prompts import load_prompts, text_prompts
    from ..golden.lm.tokenizer import EOT
    if texts and prompts:
        raise InputError("--prompts names held-out prompts; --prompt and --prompt-file give your "
                         "own: accepted one of the two")
    ckpt = load_checkpoint(checkpoint) if checkpoint else load_bundled(config.model)
    corpus = load_corpus()
    if texts:
        decode = config.decode
        room = ckpt.model.cfg.max_seq_len - decode.max_new_tokens - decode.max_depth
        token_lists = text_prompts(list(texts), ckpt.tokenizer, max(room, 0))
    else:
        token_lists = load_prompts(corpus, ckpt.tokenizer, prompts)
    return ckpt, corpus, token_lists, ckpt.tokenizer.token_to_id(EOT)


def print_json(data) -> None:
    print(json.dumps(data, indent=2, sort_keys=True))


def write_result(data: dict, *parts: str) -> Path:
    """`data` as JSON in build/<parts...> (sorted keys, so reruns compare byte for byte), and
    beside it the run that wrote it (support/provenance.py: command, settings, --quick, time)."""
    from ..support.provenance import record
    from ..support.tools import build_root
    path = build_root().joinpath(*parts)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2, sort_keys=True))
    record(path)
    return path


def publish(args, data: dict, parts: tuple[str, ...], table: Callable[[Path], None],
            shown: dict | None = None) -> Path:
    """Write `data` under build/<parts...>, then show it: with --json the JSON alone on stdout
    (`shown` when the file keeps more than the command prints), else `table(path)`."""
    path = write_result(data, *parts)
    if args.json:
        print_json(data if shown is None else shown)
    else:
        table(path)
    return path
