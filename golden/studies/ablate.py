"""`edgexpert ablate`: the settings studies behind the policy comparison (docs/policies.md).

Each study runs a few settings of one mechanism on the same prompts, held-out windows and cost
model as `edgexpert compare`, next to the references it is judged against (naive speculative
decoding, and where it matters plain decoding with the same on-chip buffer). Every setting is a
policy of the registry (golden/policies/registry.py, `build_policy`) built from the configuration with
the studied values put in; EdgeXpert's prefill reuse only where a study names it.
"""

from __future__ import annotations

import dataclasses
from typing import Callable

from ...support.progress import progress_bar
from ...contracts.weight_layout import WeightLayout
from ..decoding.decode import FloatEngine, decode_ar
from .evaluate import against_naive, measure
from ..policies.registry import COMPARED, PAPER_DRAFT, build_policy, on_chip_slots
from ..decoding.policy import Policy

__all__ = ["STUDIES", "study_settings", "run_study", "EAGLE_CAPABLE", "prefill_note"]

#: the compared policies whose rules let them draft with the EAGLE head: those whose paper does
#: (golden/policies/registry.py PAPER_DRAFT); the others read their self-draft's per-layer routing
EAGLE_CAPABLE = tuple(name for name, draft in PAPER_DRAFT.items() if draft == "eagle")

# what each study asks (`edgexpert ablate --help` prints these)
STUDIES = {
    "calibration": "EdgeXpert decode coalescing with and without computational calibration",
    "ratio": "EdgeXpert decode coalescing: share of channels each depth group fetches",
    "budget": "MoE-Spec: experts kept per layer in verification",
    "threshold": "S2-MoE and combined: the adaptive-expansion threshold",
    "slots": "SpecMoE, Specter, combined and plain decoding with 256 / 512 / 1024 KiB on chip",
    "combined": "our combined policy built up part by part, and with EdgeXpert's prefill reuse",
    "tree": "combined: the EAGLE tree's depth and candidates (chosen for the fewest total bytes per token)",
    "pruning": "EdgeXpert coalescing on the unpruned model and on the bundled pruned-and-recovered one",
    "chain": "Specter: draft chain length K (chosen offline, as Specter does, for the least bytes per token)",
    "draft": "every speculative policy with its self-draft and with the EAGLE head where its rules allow",
}


def prefill_note(labels) -> str | None:
    """What a study's EdgeXpert rows leave out, said in its output: they are built without the
    prefill encoder (only settings named "prefill reuse" get it), so they are EdgeXpert's decode
    coalescing alone, with native top-K prefill."""
    if any(label.startswith("edgexpert") for label in labels):
        return ("edgexpert rows: its decode coalescing alone, without its prefill reuse (the "
                "token encoder): their prefill is native top-K, as naive_sd's; `edgexpert "
                "compare` runs EdgeXpert whole")
    return None


def study_settings(study: str, config, model, layout, encoder=None,
                   eagle=None) -> list[tuple[str, Callable[[], Policy]]]:
    """(label, policy factory) for every setting of `study`, references first; `encoder`: the
    prefill encoder for the settings with EdgeXpert's prefill reuse; `eagle`: the EAGLE draft
    head for the policies that draft with it."""
    p, k = config.policies, model.cfg.top_k

    def setting(name: str, prefill_encoder=None, draft=None, tree=None,
                **values) -> Callable[[], Policy]:
        """Policy `name` with the `policies` values of this setting (a section's, such as
        `combined`, as a mapping of its own values; the rest from the configuration), `draft`
        (None: policies.draft) and `tree` (None: the configuration's decode tree; else (depth,
        candidates)); the prefill encoder only where the setting names it."""
        decode = config.decode if tree is None else dataclasses.replace(
            config.decode, max_depth=tree[0], max_candidates=tree[1])
        values = {key: dataclasses.replace(getattr(p, key), **value) if isinstance(value, dict)
                  else value for key, value in values.items()}
        studied = dataclasses.replace(config, decode=decode,
                                      policies=dataclasses.replace(p, **values))
        return lambda: build_policy(name, studied, model, layout, prefill_encoder, eagle, draft)

    # EdgeXpert on the compared model, whatever policies.pruned_checkpoint says
    unpruned = {"pruned_checkpoint": "none"}
    naive = [("naive_sd", setting("naive_sd"))]
    if study == "draft":
        # the reference naive_sd drafts as policies.draft says; its other draft is a setting
        own = PAPER_DRAFT["naive_sd"] if p.draft == "paper" else p.draft
        return naive + [(f"{name} draft={draft}", setting(name, draft=draft))
                        for name in COMPARED if name != "ar"
                        for draft in ("self", "eagle")
                        if (draft == "self" or name in EAGLE_CAPABLE)
                        and (name, draft) != ("naive_sd", own)]
    if study == "calibration":
        return naive + [(f"edgexpert ratio={r} calibration={c}",
                         setting("edgexpert", coalescing_ratio=r, calibration=c, **unpruned))
                        for r in (0.75, 0.5) for c in (True, False)]
    if study == "ratio":
        return naive + [(f"edgexpert ratio={r}", setting("edgexpert", coalescing_ratio=r, **unpruned))
                        for r in (0.5, 0.6, 0.75, 0.9, 1.0)]
    if study == "budget":
        return naive + [(f"moe_spec B={b}", setting("moe_spec", moe_spec_budget=b))
                        for b in (k, 2 * k, 3 * k, 4 * k, 6 * k) if b <= layout.n_experts]
    # a buffer that holds no expert is refused before any decoding, here and for each size of the
    # slots study, rather than when its setting is built
    on_chip_slots(p.onchip_expert_kib, layout)
    # the combined policy without EdgeXpert's prefill reuse (policies.combined.prefill_reuse)
    alone = {"prefill_reuse": False}
    # the combined policy's expert slots and adaptive expansion are those of its self-draft
    # (draft="self" below)
    if study == "threshold":
        return naive + [(f"{name} threshold={t}", make)
                        for t in (0.25, 0.5, 1.0, 2.0, 4.0)
                        for name, make in [("s2moe", setting("s2moe", s2moe={"threshold": t})),
                                           ("combined draft=self",
                                            setting("combined", draft="self",
                                                    combined={**alone, "threshold": t}))]]
    if study == "slots":
        out = naive + [("ar", setting("ar"))]
        for kib in (256, 512, 1024):
            on_chip_slots(kib, layout)
            out += [(f"ar_resident {kib} KiB", setting("ar_resident", onchip_expert_kib=kib)),
                    (f"specmoe {kib} KiB", setting("specmoe", onchip_expert_kib=kib)),
                    (f"specter {kib} KiB", setting("specter", onchip_expert_kib=kib)),
                    (f"combined draft=self {kib} KiB",
                     setting("combined", draft="self", onchip_expert_kib=kib,
                             combined=alone))]
        return out
    tree = (p.combined.depth, p.combined.candidates)
    full = (config.decode.max_depth, config.decode.max_candidates)
    if study == "combined":
        t = p.combined.threshold
        return naive + [
            (f"naive_sd draft=eagle, tree {tree[0]}x{tree[1]}",
             setting("naive_sd", draft="eagle", tree=tree)),
            (f"+ SRAM by reuse, head on chip, tree {full[0]}x{full[1]}",
             setting("combined", draft="eagle",
                     combined={**alone, "depth": full[0], "candidates": full[1]})),
            (f"+ tree {tree[0]}x{tree[1]} (combined)",
             setting("combined", draft="eagle", combined=alone)),
            ("+ EdgeXpert prefill reuse",
             setting("combined", encoder, draft="eagle", combined={"prefill_reuse": True})),
            ("specmoe (resident self-draft)", setting("specmoe")),
            (f"combined draft=self (+ adaptive expansion, threshold {t})",
             setting("combined", draft="self", combined=alone))]
    if study == "tree":
        return naive + [(f"combined tree {d}x{c}",
                         setting("combined", draft="eagle",
                                 combined={**alone, "depth": d, "candidates": c}))
                        for d, c in ((2, 4), (2, 8), (3, 4), (3, 8), (3, 16), (4, 8), (4, 16),
                                     (6, 16), (6, 64))]
    if study == "chain":
        return naive + [(f"specter K={c}", setting("specter", specter={"chain": c}))
                        for c in (1, 2, 3, 4, 6, 8)]
    if study == "pruning":
        return naive + [(f"edgexpert ratio={r}",
                         setting("edgexpert", coalescing_ratio=r, pruning_sparsity=0.0, **unpruned))
                        for r in (0.75, 0.6, 0.5)] + \
                       [(f"edgexpert pruned ratio={r}",
                         setting("edgexpert", coalescing_ratio=r, pruned_checkpoint="bundled"))
                        for r in (1.0, 0.85, 0.75)]
    raise ValueError(f"unknown study {study!r}: accepted {', '.join(STUDIES)}")


def run_study(study: str, config, model, prompts: list[list[int]], windows: list[list[int]],
              eot: int | None, encoder=None, eagle=None, progress: bool = True) -> dict:
    """Every setting of `study` measured as `edgexpert compare` measures a policy, keyed by label
    (`eagle`: the EAGLE draft head for the settings that draft with it; `progress`: a bar over
    the settings)."""
    engine = FloatEngine(model)
    layout = WeightLayout.for_model(model.cfg)
    settings = study_settings(study, config, model, layout, encoder, eagle)
    reference = [decode_ar(engine, prompt, config.decode, eot) for prompt in prompts]
    out = {}
    bar = progress_bar(settings, desc=study, unit="setting", enabled=progress)
    for label, make in bar:
        bar.set_postfix_str(label)
        out[label] = measure(engine, make(), prompts, reference, windows,
                             config.policies.eval_prompt_tokens, eot)
    return against_naive(out, out["naive_sd"]["ema_bytes_per_token_decode"])
