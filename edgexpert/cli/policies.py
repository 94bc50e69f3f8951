"""The decoding policies: `compare` side by side and the `ablate` settings studies."""

from __future__ import annotations

import argparse
import dataclasses

from ..contracts.errors import InputError
from .common import (QUICK, checkpoint_option, golden_inputs, load, print_json, prompt_options,
                     prompt_texts, publish, settings_note, settings_options, write_result)
from .draft import eagle_head

__all__ = ["register"]

COMPARE_COLUMNS = [("tokens_per_step", "tok/step"), ("passes_per_token", "passes/tok"),
                   ("total_bytes_per_token", "total B/tok"),
                   ("total_change_vs_naive_sd", "vs naive_sd"),
                   ("expert_bytes_per_token", "expert B/tok"),
                   ("nonexpert_bytes_per_token", "non-exp B/tok"),
                   ("kv_bytes_per_token", "KV B/tok"),
                   ("ema_bytes_per_token_prefill", "exp B/prompt tok"),
                   ("top1_agreement", "top-1"), ("mean_kl", "KL"), ("ppl_ratio", "ppl ratio"),
                   ("greedy_sequence_match", "greedy identical"),
                   ("greedy_prefix_match", "greedy prefix")]
#: how a column is shown when it is not shown as stored: the change as a signed percentage
COLUMN_FORMATS = {"total_change_vs_naive_sd": "{:+.1%}", "ema_change_vs_naive_sd": "{:+.1%}"}
COLUMN_WIDTH = 17


def _policy_inputs(args, config):
    """What `compare` and `ablate` measure on: (checkpoint, prompts, held-out windows,
    end-of-text id)."""
    from ..golden.lm.train import eval_windows, token_streams
    ckpt, corpus, prompts, eot = golden_inputs(config, args.checkpoint, texts=prompt_texts(args))
    p = config.policies
    _, heldout = token_streams(corpus, ckpt.tokenizer)
    windows = [w.tolist() for w in
               eval_windows(heldout, p.eval_prompt_tokens + p.eval_continuation - 1, p.eval_windows)]
    return ckpt, prompts, windows, eot


def _print_policy_table(results: dict, first: str) -> None:
    """One row per policy or setting, in the results' order (by total bytes per token); a
    column a study's results lack (no naive_sd to compare with) is left out."""
    columns = [(k, t) for k, t in COMPARE_COLUMNS if all(k in m for m in results.values())]
    width = max(len(first), *(len(name) for name in results)) + 2
    print(f"{first:<{width}}" + "".join(f"{title:>{COLUMN_WIDTH}}" for _, title in columns))
    for name, metrics in results.items():
        print(f"{name:<{width}}" + "".join(
            f"{COLUMN_FORMATS.get(key, '{}').format(metrics[key]):>{COLUMN_WIDTH}}"
            for key, _ in columns))


def _with_traffic(results: dict, config) -> dict:
    """Every byte a decoded token costs, per policy (sim/perf/traffic.py), ordered by total bytes."""
    from ..sim.perf.models import bundled_spec
    from ..sim.perf.traffic import add_traffic
    return add_traffic(results, bundled_spec(config.model.name), config)


def _policy_header(command: str, config, prompts, windows, args) -> str:
    p = config.policies
    which = "user" if args.prompt or args.prompt_file else "bundled"
    return (f"edgexpert {command}: {len(prompts)} {which} prompts ({config.decode.max_new_tokens} "
            f"new tokens, greedy) and {len(windows)} held-out windows ({p.eval_prompt_tokens} + "
            f"{p.eval_continuation} tokens, teacher-forced) on the float path; seed "
            f"{config.decode.seed}; {settings_note(config)}")


def cmd_compare(args) -> int:
    config = load(args)
    from ..support.tools import build_root
    from ..golden.studies.evaluate import compare
    from ..golden.policies.prefill import load_encoder
    from .plot import tradeoff_plot
    ckpt, prompts, windows, eot = _policy_inputs(args, config)
    encoder = load_encoder(ckpt.model, ckpt.path)[0]
    result = _with_traffic(compare(config, ckpt.model, prompts, windows, eot, encoder,
                                   eagle_head(ckpt, config)), config)
    report = {"policies": result, "prompts": len(prompts), "windows": len(windows),
              "decode": dataclasses.asdict(config.decode),
              "settings": dataclasses.asdict(config.policies)}
    header = _policy_header("compare", config, prompts, windows, args)

    plot = tradeoff_plot(result, build_root() / "compare" / "compare.png", header)

    def table(path) -> None:
        print(header)
        _print_policy_table(result, "policy")
        print(f"table: {path}\nplot:  {plot}")

    publish(args, report, ("compare", "compare.json"), table, shown=result)
    return 0


def check_studies(args) -> list[str]:
    """The studies `ablate` was asked for, each a known one."""
    from ..golden.studies.ablate import STUDIES
    studies = list(STUDIES) if args.all else args.study
    if not studies:
        raise InputError(f"name a study or pass --all: accepted {', '.join(STUDIES)}")
    for study in studies:
        if study not in STUDIES:
            raise InputError(f"unknown study {study!r}: accepted {', '.join(STUDIES)}")
    return studies


def cmd_ablate(args) -> int:
    config = load(args)
    studies = check_studies(args)
    from ..golden.studies.ablate import STUDIES, run_study
    from ..golden.policies.prefill import load_encoder
    from .plot import tradeoff_plot
    ckpt, prompts, windows, eot = _policy_inputs(args, config)
    header = _policy_header("ablate", config, prompts, windows, args)
    encoder = load_encoder(ckpt.model, ckpt.path)[0]
    # these studies draft with the head whatever policies.draft says
    eagle = eagle_head(ckpt, config, needed=bool({"draft", "combined", "tree"} & set(studies)))
    everything = {}
    for study in studies:
        result = _with_traffic(run_study(study, config, ckpt.model, prompts, windows, eot,
                                         encoder, eagle=eagle), config)
        everything[study] = result
        out = write_result({"study": study, "question": STUDIES[study], "settings": result,
                            "prompts": len(prompts), "windows": len(windows),
                            "decode": dataclasses.asdict(config.decode),
                            "policies": dataclasses.asdict(config.policies)},
                           "ablate", f"{study}.json")
        plot = tradeoff_plot(result, out.with_suffix(".png"),
                             f"{study}: {STUDIES[study]}; {settings_note(config)}")
        if not args.json:
            print(f"{header}\n{study}: {STUDIES[study]}")
            _print_policy_table(result, "setting")
            print(f"table: {out}\nplot:  {plot}\n")
    if args.json:
        print_json(everything)
    return 0


class _StudiesHelp(argparse.Action):
    """`ablate --help`: the study names and questions are golden/studies/ablate.py's STUDIES, which
    imports torch, so they are read only when this help is asked for."""

    def __init__(self, option_strings, dest=argparse.SUPPRESS, default=argparse.SUPPRESS,
                 help=None):
        super().__init__(option_strings, dest=dest, default=default, nargs=0, help=help)

    def __call__(self, parser, namespace, values, option_string=None):
        from ..golden.studies.ablate import STUDIES
        width = max(map(len, STUDIES)) + 2
        parser.epilog = "studies:\n" + "\n".join(f"  {name:<{width}}{question}"
                                                 for name, question in STUDIES.items())
        parser.print_help()
        parser.exit()


def _quick_option(p) -> None:
    p.add_argument("--quick", action="store_true",
                   help=f"a short run: {' '.join('--set ' + s for s in QUICK)} before your own "
                        "--set (the plot title names every changed setting)")


def register(sub) -> None:
    p = sub.add_parser("compare", parents=[settings_options()],
                       help="every decoding policy side by side: traffic and quality")
    checkpoint_option(p)
    prompt_options(p)
    _quick_option(p)
    p.add_argument("--json", action="store_true", help="print one JSON object keyed by policy")
    p.set_defaults(func=cmd_compare)

    studies_help = argparse.ArgumentParser(add_help=False)   # a parent, so that -h comes first
    studies_help.add_argument("-h", "--help", action=_StudiesHelp,
                              help="show this help message, with the studies, and exit")
    p = sub.add_parser("ablate", parents=[studies_help, settings_options()], add_help=False,
                       formatter_class=argparse.RawDescriptionHelpFormatter,
                       help="settings studies of the policies (calibration, ratio, budgets, ...)")
    p.add_argument("study", nargs="*", help="studies to run (listed below and in docs/policies.md)")
    p.add_argument("--all", action="store_true", help="run every study")
    checkpoint_option(p)
    prompt_options(p)
    _quick_option(p)
    p.add_argument("--json", action="store_true", help="print one JSON object keyed by study")
    p.set_defaults(func=cmd_ablate)
