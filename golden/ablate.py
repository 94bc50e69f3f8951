"""`edgexpert ablate`: the settings studies behind the policy comparison (docs/policies.md).

Each study runs a few settings of one mechanism on the same prompts, held-out windows and cost
model as `edgexpert compare`, next to the references it is judged against (naive speculative
decoding, and where it matters plain decoding with the same on-chip buffer).
"""

from __future__ import annotations

from typing import Callable

from .decode import FloatEngine, decode_ar
from .evaluate import against_naive, measure, on_chip_slots, prefill_routing, pruned_edgexpert
from .policies import (Autoregressive, Combined, EdgeXpert, MoESpec, ResidentAR, S2MoE, SpecMoE,
                       Specter)
from .policy import Policy

__all__ = ["STUDIES", "study_settings", "run_study"]

# what each study asks (`edgexpert ablate --help` prints these)
STUDIES = {
    "calibration": "EdgeXpert decode coalescing with and without computational calibration",
    "ratio": "EdgeXpert decode coalescing: share of channels each depth group fetches",
    "budget": "MoE-Spec: experts kept per layer in verification",
    "threshold": "S2-MoE and combined: the adaptive-expansion threshold",
    "slots": "SpecMoE, Specter, combined and plain decoding with 256 / 512 / 1024 KiB on chip",
    "combined": "our combined policy built up part by part, and with EdgeXpert's prefill reuse",
    "pruning": "EdgeXpert coalescing on the unpruned model and on the bundled pruned-and-recovered one",
    "chain": "Specter: draft chain length K (chosen offline, as Specter does, for the least bytes per token)",
}


def study_settings(study: str, config, model, layout,
                   encoder=None) -> list[tuple[str, Callable[[], Policy]]]:
    """(label, policy factory) for every setting of `study`, references first; `encoder`: the
    prefill encoder for the settings with EdgeXpert's prefill reuse."""
    p, d, k = config.policies, config.decode, model.cfg.top_k
    naive = [("naive_sd", lambda: Policy(layout, d))]
    if study == "calibration":
        return naive + [(f"edgexpert ratio={r} calibration={c}",
                         lambda r=r, c=c: EdgeXpert(layout, d, model, r, p.pruning_sparsity, c))
                        for r in (0.75, 0.5) for c in (True, False)]
    if study == "ratio":
        return naive + [(f"edgexpert ratio={r}",
                         lambda r=r: EdgeXpert(layout, d, model, r, p.pruning_sparsity, p.calibration))
                        for r in (0.5, 0.6, 0.75, 0.9, 1.0)]
    if study == "budget":
        return naive + [(f"moe_spec B={b}", lambda b=b: MoESpec(layout, d, k, b))
                        for b in (k, 2 * k, 3 * k, 4 * k, 6 * k) if b <= layout.n_experts]
    slots = on_chip_slots(p.onchip_expert_kib, layout)
    if study == "threshold":
        return naive + [(f"{name} threshold={t}", make)
                        for t in (0.25, 0.5, 1.0, 2.0, 4.0)
                        for name, make in [("s2moe", lambda t=t: S2MoE(layout, d, k, t, p.s2moe_cap)),
                                           ("combined", lambda t=t: Combined(layout, d, model, slots, t))]]
    if study == "slots":
        out = naive + [("ar", lambda: Autoregressive(layout, d))]
        for kib in (256, 512, 1024):
            n = on_chip_slots(kib, layout)
            out += [(f"ar_resident {kib} KiB", lambda n=n: ResidentAR(layout, d, n)),
                    (f"specmoe {kib} KiB", lambda n=n: SpecMoE(layout, d, model, n)),
                    (f"specter {kib} KiB", lambda n=n: Specter(layout, d, model, n, p.specter_chain,
                                                               p.specter_draft_bits)),
                    (f"combined {kib} KiB", lambda n=n: Combined(layout, d, model, n,
                                                                 p.combined_threshold))]
        return out
    if study == "combined":
        t = p.combined_threshold
        return naive + [
            ("specmoe (resident draft)", lambda: SpecMoE(layout, d, model, slots)),
            (f"+ adaptive expansion, on-chip experts free (combined, threshold {t})",
             lambda: Combined(layout, d, model, slots, t)),
            ("+ EdgeXpert prefill reuse",
             lambda: Combined(layout, d, model, slots, t, prefill_routing(config, encoder, k)))]
    if study == "chain":
        return naive + [(f"specter K={c}", lambda c=c: Specter(layout, d, model, slots, c,
                                                               p.specter_draft_bits))
                        for c in (1, 2, 3, 4, 6, 8)]
    if study == "pruning":
        return naive + [(f"edgexpert ratio={r}",
                         lambda r=r: EdgeXpert(layout, d, model, r, 0.0, p.calibration))
                        for r in (0.75, 0.6, 0.5)] + \
                       [(f"edgexpert pruned ratio={r}",
                         lambda r=r: pruned_edgexpert(layout, d, model, r, p.calibration))
                        for r in (1.0, 0.85, 0.75)]
    raise ValueError(f"unknown study {study!r}: accepted {', '.join(STUDIES)}")


def run_study(study: str, config, model, prompts: list[list[int]], windows: list[list[int]],
              eot: int | None, encoder=None,
              progress: Callable[[str], None] = lambda label: None) -> dict:
    """Every setting of `study` measured as `edgexpert compare` measures a policy, keyed by label."""
    from ..contracts.weight_layout import WeightLayout
    engine = FloatEngine(model)
    layout = WeightLayout.for_model(model.cfg)
    settings = study_settings(study, config, model, layout, encoder)
    reference = [decode_ar(engine, prompt, config.decode, eot) for prompt in prompts]
    out = {}
    for label, make in settings:
        progress(label)
        policy = make()
        policy.prefill_chunk = config.policies.prefill_chunk
        out[label] = measure(engine, policy, prompts, reference, windows,
                             config.policies.eval_prompt_tokens, eot)
    return against_naive(out, out["naive_sd"]["ema_bytes_per_token_decode"])
