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


def _policy_inputs(args, config, with_heldout: bool = False):
    """What `compare` and `ablate` measure on: (checkpoint, prompts, held-out windows,
    end-of-text id), and the held-out token stream with `with_heldout`."""
    from ..golden.lm.train import eval_windows, heldout_stream
    ckpt, corpus, prompts, eot = golden_inputs(config, getattr(args, "checkpoint", None),
                                               texts=prompt_texts(args))
    p = config.policies
    heldout = heldout_stream(corpus, ckpt.tokenizer)
    windows = [w.tolist() for w in
               eval_windows(heldout, p.eval_prompt_tokens + p.eval_continuation - 1, p.eval_windows)]
    return (ckpt, prompts, windows, eot) + ((heldout,) if with_heldout else ())


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
    from ..golden.studies.ablate import STUDIES, prefill_note, run_study
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
        note = prefill_note(result)
        out = write_result({"study": study, "question": STUDIES[study], "settings": result,
                            **({"note": note} if note else {}),
                            "prompts": len(prompts), "windows": len(windows),
                            "decode": dataclasses.asdict(config.decode),
                            "policies": dataclasses.asdict(config.policies)},
                           "ablate", f"{study}.json")
        plot = tradeoff_plot(result, out.with_suffix(".png"),
                             f"{study}: {STUDIES[study]}; {settings_note(config)}")
        if not args.json:
            print(f"{header}\n{study}: {STUDIES[study]}")
            _print_policy_table(result, "setting")
            if note:
                print(note)
            print(f"table: {out}\nplot:  {plot}\n")
    if args.json:
        print_json(everything)
    return 0


#: the figures EdgeXpert reports for its mechanisms (REFERENCES.md; EdgeXpert, MICRO 2026,
#: arXiv 2608.05303), and issue 4's decode target, which is the project's, not the paper's: the
#: sources give no decode-only EMA saving of EdgeXpert's
PAPER = {"prefill_saving": (0.557, "EdgeXpert: prefill expert memory traffic -55.7 %"),
         "coactivation": (0.884, "EdgeXpert: up to 88.4 % of same-depth candidates "
                                 "co-activate >= 3 experts"),
         "decode_target": (0.40, "issue 4's target (not a paper figure): decode EMA bytes per "
                                 "token >= 40 % below naive speculative decoding at top-1 >= 0.95")}
#: `mechanisms`' rows: (label, section, key path, format); the explanation's keys are
#: golden/studies/mechanisms.py's
MECHANISM_ROWS = [
    ("experts / decode step, naive_sd", "decode", ("naive_sd", "experts_per_step"), "{:.1f}"),
    ("tokens / step, naive_sd -> edgexpert", "decode", None, None),
    ("expert B / step, naive_sd", "decode", ("naive_sd", "ema_bytes_per_step"), "{:,}"),
    ("expert B / step, edgexpert", "decode", ("edgexpert", "ema_bytes_per_step"), "{:,}"),
    ("  as whole experts, naive_sd", "decode", ("naive_sd", "expert_equivalents_per_step"),
     "{:.1f}"),
    ("  as whole experts, edgexpert", "decode", ("edgexpert", "expert_equivalents_per_step"),
     "{:.1f}"),
    ("decode saving per step", "decode", ("saving_per_step",), "{:+.1%}"),
    ("decode saving per token", "decode", ("saving_per_token",), "{:+.1%}"),
    ("edgexpert top-1 / ppl ratio", "decode", None, None),
    # what explains the decode saving: (label, the explanation's part and measurement)
    *[(label, "decode", ("explanation", *key), fmt) for label, key, fmt in [
        ("GATE_UP: hottest 25% channels' importance", ("gate_up", "hot_quarter_importance"),
         "{:.3f}"),
        ("GATE_UP: importance the selection keeps", ("gate_up", "selected_importance"), "{:.3f}"),
        ("GATE_UP: candidates' own channels selected", ("gate_up", "own_channels_selected"),
         "{:.3f}"),
        ("GATE_UP: candidates per depth group", ("gate_up", "candidates_per_group"), "{:.2f}"),
        ("GATE_UP: pass's fetched share of a matrix", ("gate_up", "pass_fetched_share"), "{:.3f}"),
        ("DOWN: hottest 25% channels' importance", ("down", "hot_quarter_importance"), "{:.3f}"),
        ("DOWN: pass's fetched share of a matrix", ("down", "pass_fetched_share"), "{:.3f}"),
        ("candidates sharing >= 3 experts", ("coactivation", "candidate_fraction"), "{:.3f}"),
        ("candidate pairs sharing >= 3 experts", ("coactivation", "pair_fraction"), "{:.3f}")]],
    ("prefill k / n of top-K", "prefill", None, None),
    ("prefill expert B / prompt token, native", "prefill",
     ("native_prefill_bytes_per_token",), "{:,}"),
    ("prefill expert B / prompt token, reuse", "prefill", ("prefill_bytes_per_token",), "{:,}"),
    ("prefill saving", "prefill", ("prefill_bytes_reduction",), "{:+.1%}"),
    ("prefill ppl ratio", "prefill", ("ppl_ratio",), "{}"),
    ("major / minor tokens", "prefill", None, None),
    ("shared set |S| / experts", "prefill", ("explanation", "shared_set_share"), "{:.3f}"),
    ("experts per chunk-layer, native", "prefill",
     ("explanation", "chunk_experts_native"), "{:.1f}"),
    ("experts per chunk-layer, reuse", "prefill",
     ("explanation", "chunk_experts_reuse"), "{:.1f}"),
]


def _mechanism_cell(result: dict, label: str, section: str, path, fmt) -> str:
    """One model's entry of a `mechanisms` row."""
    part = result[section]
    if path is None:   # the rows that join two values
        if label.startswith("tokens"):
            return (f"{part['naive_sd']['tokens_per_step']:.2f} -> "
                    f"{part['edgexpert']['tokens_per_step']:.2f}")
        if label.startswith("edgexpert top-1"):
            return f"{part['edgexpert']['top1_agreement']:.3f} / {part['edgexpert']['ppl_ratio']}"
        if label.startswith("prefill k"):
            return (f"{part['settings']['budget_minor']} / {part['settings']['budget_trivial']} "
                    f"of {result['model']['top_k']}")
        e = part["explanation"]
        return f"{e['major_share']:.2f} / {e['minor_share']:.2f}"
    for key in path:
        part = part[key]
    # savings print as the change (negative: fewer bytes), as every table of docs/policies.md
    value = -part if "saving" in label or "reduction" in path[-1] else part
    return fmt.format(value)


def _paper_cell(label: str) -> str:
    if label == "prefill saving":
        return f"{-PAPER['prefill_saving'][0]:+.1%}"
    if label == "candidates sharing >= 3 experts":
        return f"up to {PAPER['coactivation'][0]:.3f}"
    if label == "decode saving per token":
        return f"target {-PAPER['decode_target'][0]:+.0%} (issue 4)"
    return ""


def cmd_mechanisms(args) -> int:
    """EdgeXpert's decode coalescing and prefill reuse on each bundled model of --models, side
    by side with the paper's figures, and the measurements that explain the difference
    (golden/studies/mechanisms.py)."""
    from ..contracts.config import MODEL_NAMES, load_config
    from ..golden.policies.prefill import load_encoder
    from ..golden.studies.mechanisms import mechanisms
    from .common import config_sources
    from .prefill import _check_windows, _prompt_windows

    models = [m.strip() for m in args.models.split(",")]
    if not models or any(m not in MODEL_NAMES for m in models) or len(set(models)) < len(models):
        raise InputError(f"--models {args.models}: accepted a comma-separated list of distinct "
                         f"bundled models: {', '.join(MODEL_NAMES)}")
    _check_windows(args.prefill_windows)
    import torch
    # one thread, as the prefill studies: a second one waits more than it works on shared cores
    torch.set_num_threads(1)
    path, overrides = config_sources(args)
    results, headers = {}, []
    for name in models:
        # each model's own settings (configs/<name>.yaml) under the user's --config and --set
        config = load_config(path, [*overrides, f"model.name={name}"])
        ckpt, prompts, windows, eot, heldout = _policy_inputs(args, config, with_heldout=True)
        encoder = load_encoder(ckpt.model, ckpt.path)[0]
        headers.append(_policy_header(f"mechanisms ({name})", config, prompts, windows, args))
        results[name] = mechanisms(config, ckpt.model, prompts, windows,
                                   _prompt_windows(heldout, config, args.prefill_windows), eot,
                                   encoder, eagle_head(ckpt, config, needed=True))
    report = {"models": results, "prefill_windows": args.prefill_windows,
              "paper": {k: {"value": v, "source": s} for k, (v, s) in PAPER.items()},
              "settings": dataclasses.asdict(config.policies),
              "decode": dataclasses.asdict(config.decode)}

    def table(out) -> None:
        print("\n".join(headers))
        print(f"prefill: {args.prefill_windows} held-out windows of "
              f"{config.policies.eval_prompt_tokens} tokens, chunk {config.policies.prefill.chunk}")
        width = max(len(r[0]) for r in MECHANISM_ROWS) + 2
        print(f"{'':<{width}}" + "".join(f"{m:>20}" for m in models) + f"{'paper':>26}")
        for label, section, key, fmt in MECHANISM_ROWS:
            print(f"{label:<{width}}"
                  + "".join(f"{_mechanism_cell(results[m], label, section, key, fmt):>20}"
                            for m in models) + f"{_paper_cell(label):>26}")
        for _, source in PAPER.values():
            print(f"paper: {source}")
        print(f"table: {out}")

    publish(args, report, ("mechanisms", "mechanisms.json"), table)
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

    p = sub.add_parser("mechanisms", parents=[settings_options()],
                       help="EdgeXpert's decode coalescing and prefill reuse on the bundled models "
                            "side by side with the paper's figures, and why they differ")
    p.add_argument("--models", default="coarse,fine", metavar="M[,M]",
                   help="bundled models (model.name), comma-separated (default coarse,fine)")
    p.add_argument("--prefill-windows", type=int, default=16, metavar="N",
                   help="held-out prompt windows for the prefill reuse (default 16)")
    prompt_options(p)
    _quick_option(p)
    p.add_argument("--json", action="store_true", help="print one JSON object keyed by model")
    p.set_defaults(func=cmd_mechanisms)
