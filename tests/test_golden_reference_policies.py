"""The reference systems' policies and ours: what they keep on chip, what they fetch, how they
grow the tree, and that the lossless ones give exactly the exact model's greedy output."""

import pytest
import torch

from edgexpert.contracts.config import ConfigError, load_config
from edgexpert.contracts.trace import PassKind
from edgexpert.golden.decoding.decode import FloatEngine, Tree, decode_ar, decode_speculative
from edgexpert.golden.lm.model import LayerTrace
from edgexpert.golden.policies.combined import Combined
from edgexpert.golden.policies.registry import on_chip_slots
from edgexpert.golden.policies.resident import ResidentAR, SpecMoE, affinity_order
from edgexpert.golden.policies.s2moe import AdaptiveExpansion, S2MoE, reuse_aware_router
from edgexpert.golden.policies.specter import Specter, quantized_experts
from edgexpert.golden.decoding.policy import ExpertSlots, hottest
from edgexpert.contracts.weight_layout import WeightLayout

PROMPT = [4, 5, 6, 7, 8, 9, 10, 11]


@pytest.fixture(scope="module")
def setting(policy_overrides, loud_model):
    config = load_config(overrides=policy_overrides)
    model = loud_model(config, seed=7)
    engine = FloatEngine(model)
    reference = decode_ar(engine, PROMPT, config.decode).tokens
    return config, model, engine, WeightLayout.for_model(config.model), reference


def test_expert_slots_evict_the_least_recently_used():
    slots = ExpertSlots(n_layers=2, capacity=2)
    assert not slots.touch(0, 3) and not slots.touch(0, 5)
    assert slots.touch(0, 3)                 # hit; 5 is now the least recently used
    assert not slots.touch(0, 7)             # evicts 5
    assert (0, 3) in slots and (0, 7) in slots and (0, 5) not in slots
    assert (1, 3) not in slots               # layers are separate
    slots.replace(1, [4, 2])
    assert not slots.touch(1, 6) and (1, 4) in slots and (1, 2) not in slots   # 4 was used last
    with pytest.raises(ValueError, match="3 experts do not fit 2 slots"):
        slots.replace(0, [1, 2, 3])


def test_hottest_counts_uses_then_weight():
    experts = torch.tensor([[0, 1], [1, 2], [2, 0], [3, -1]])
    weights = torch.tensor([[0.6, 0.4], [0.9, 0.1], [0.8, 0.2], [1.0, 0.0]])
    trace = LayerTrace(torch.zeros(4, 2), torch.zeros(4, 5), experts, weights)
    # 0, 1, 2 are used twice each: summed weights 0.8, 1.3, 0.9; 3 once; 4 never
    assert hottest(trace, 3) == [1, 2, 0]
    assert hottest(trace, 5) == [1, 2, 0, 3]


def test_hottest_experts_stay_and_free_slots_keep_what_they_held(setting):
    config, model, _, layout, _ = setting
    policy = SpecMoE(layout, config.decode, model, slots=3)
    policy.slots.replace(0, [5, 6, 7])            # 5 used last
    trace = LayerTrace(torch.zeros(2, 4), torch.zeros(2, 8), torch.tensor([[1, 2], [1, -1]]),
                       torch.tensor([[0.5, 0.5], [1.0, 0.0]]))
    policy.keep_hottest([trace, trace])
    assert policy.slots.layers[0] == [5, 2, 1]     # 1 and 2 used, 5 the most recent of the rest
    assert policy.slots.layers[1] == [2, 1]        # nothing held before


def test_reuse_aware_gating_biases_the_choice():
    logits = torch.tensor([[4.0, 3.0, 2.9, 0.0, 0.0, 0.0],
                           [4.0, 0.0, 3.5, 3.6, 0.0, 0.0],
                           [0.0, 0.0, 0.0, 0.0, 0.5, 0.6]], dtype=torch.float64)
    idx = reuse_aware_router(top_k=2, cap=2)(0, logits, None)
    # confident tokens 0 and 1 make experts 0 and 2 the preferred set; token 1 takes 2 over 3
    # and the unsure token 2 is pulled onto the preferred experts as well
    assert sorted(idx[0].tolist()) == [0, 2] and sorted(idx[1].tolist()) == [0, 2]
    assert sorted(idx[2].tolist()) == [0, 2]


def _pool():
    """Root children 0 (p 0.6) and 1 (p 0.05); 0's children 2 (p 0.5) and 3 (p 0.3)."""
    import math
    lp = math.log
    return Tree(tokens=[10, 11, 12, 13], parents=[-1, -1, 0, 0], depths=[1, 1, 2, 2],
                scores=[lp(0.6), lp(0.05), lp(0.6 * 0.5), lp(0.6 * 0.3)])


def test_adaptive_expansion_admits_by_confidence_and_new_experts(setting):
    config = setting[0]
    routed = {-1: torch.tensor([[0, 1]]), 0: torch.tensor([[0, 1]]),
              2: torch.tensor([[0, 2]]), 3: torch.tensor([[4, 5]])}
    pool = _pool()
    # ar_cost 2: node 2 (a 0.3, one new expert) scores 0.6, node 3 (a 0.18, two new) 0.18
    grow = AdaptiveExpansion(config.decode, ar_cost=2, threshold=0.5)
    assert grow.admit(pool, routed, [-1]) == [-1]
    assert grow.admit(pool, routed, [0, 1]) == [0]      # 1's confidence is below 0.1
    assert grow.select(pool, routed) == [0, 2]
    # on chip experts are free: node 3 adds nothing new, so it joins
    free = AdaptiveExpansion(config.decode, 2, 0.5, free=lambda layer, e: e in (4, 5))
    free.admit(pool, routed, [-1])
    free.admit(pool, routed, [0, 1])
    assert free.select(pool, routed) == [0, 2, 3]


def test_specmoe_drafts_on_resident_experts_only(setting):
    config, model, engine, layout, reference = setting
    policy = SpecMoE(layout, config.decode, model, slots=3)
    run = decode_speculative(engine, PROMPT, config.decode, policy=policy)
    assert run.tokens == reference                       # verification is the target's
    drafts = [p for p in run.passes if p.kind == PassKind.DRAFT]
    assert drafts and all(p.bytes == 0 for p in drafts)
    assert all(max(p.experts_per_layer) <= 3 for p in drafts)
    verify = [p for p in run.passes if p.kind == PassKind.VERIFY]
    # each verification fetches at most the experts it uses, some of them are on chip
    assert all(p.bytes <= sum(p.experts_per_layer) * layout.expert_fetch_bytes for p in verify)
    assert sum(p.bytes for p in verify) < sum(sum(p.experts_per_layer) for p in verify) * \
        layout.expert_fetch_bytes
    order = affinity_order(model)
    assert torch.equal(order[0][:, 0], torch.arange(config.model.n_experts))   # itself first


def test_specter_drafts_a_quantized_chain_and_prefetches(setting):
    config, model, engine, layout, reference = setting
    policy = Specter(layout, config.decode, model, slots=4, chain=3, draft_bits=2)
    assert policy.decode.max_candidates == 3 and policy.decode.branch == 1
    run = decode_speculative(engine, PROMPT, policy.decode, policy=policy)
    assert run.tokens == reference
    assert all(a <= 3 for a in run.accepted)
    # a draft pass fetches its experts' 2-bit copies: half the int4 bytes
    for p in run.passes:
        if p.kind == PassKind.DRAFT:
            assert p.bytes == -(-sum(p.experts_per_layer) * layout.expert_fetch_bytes // 2)
    ternary = quantized_experts(model, 2).layers[0].moe.w_up[0]
    assert all(len(torch.unique(row.abs())) <= 2 for row in ternary)   # 0 and the scale
    with pytest.raises(ValueError, match="draft_bits = 5 is out of range: accepted 2..4"):
        Specter(layout, config.decode, model, 4, 3, 5)


def test_specter_prefetches_the_drafts_hottest_experts_into_lru_slots(setting):
    config, model, _, layout, _ = setting
    policy = Specter(layout, config.decode, model, slots=2, chain=2, draft_bits=2)
    policy.start([1, 2])

    def trace(experts):
        idx = torch.tensor(experts)
        return LayerTrace(torch.zeros(len(experts), 4), torch.zeros(len(experts), 8), idx,
                          torch.ones(idx.shape) / idx.shape[1])
    whole = layout.expert_fetch_bytes
    # two draft passes choose expert 3 twice and 5 once in layer 0 (6 in layer 1): 2-bit copies
    draft = PassKind.DRAFT
    assert policy.decode_bytes(draft, [trace([[3, 5]]), trace([[6, 6]])]) == -(-3 * whole // 2)
    assert policy.decode_bytes(draft, [trace([[3, -1]]), trace([[6, -1]])]) == -(-2 * whole // 2)
    # verification: 3 and 5 are prefetched in layer 0 and 6 in layer 1 (one load each); it then
    # uses 3 (a hit) and 7 (a demand load evicting 5, the least recently used)
    moved = policy.decode_bytes(PassKind.VERIFY, [trace([[3, 7]]), trace([[6, -1]])])
    assert moved == 4 * whole
    assert policy.slots.layers[0] == [3, 7] and policy.slots.layers[1] == [6]
    assert int(policy.histogram.sum()) == 0          # a new histogram for the next step


def test_combined_is_lossless_and_drafts_for_free(setting):
    config, model, engine, layout, reference = setting
    run = decode_speculative(engine, PROMPT, config.decode,
                             policy=Combined(layout, config.decode, model, slots=3, threshold=0.25,
                                             tree=(2, 4)))
    assert run.tokens == reference
    assert all(p.bytes == 0 for p in run.passes if p.kind == PassKind.DRAFT)


def test_resident_ar_saves_fetches_not_tokens(setting):
    config, _, engine, layout, reference = setting
    run = decode_ar(engine, PROMPT, config.decode, policy=ResidentAR(layout, config.decode, 3))
    plain = decode_ar(engine, PROMPT, config.decode)
    assert run.tokens == reference
    ar_bytes = sum(p.bytes for p in plain.passes if p.kind == PassKind.AR)
    assert sum(p.bytes for p in run.passes if p.kind == PassKind.AR) < ar_bytes


def test_s2moe_gating_concentrates_verification(setting):
    config, _, _, layout, _ = setting
    policy = S2MoE(layout, config.decode, config.model.top_k, threshold=0.25, cap=2)
    logits = torch.randn(20, 8, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    native = torch.sort(-logits, dim=-1, stable=True).indices[:, :2]
    gated = policy.router(PassKind.VERIFY, torch.arange(20))(0, logits, None)
    # more of the token-expert pairs land on the two most used experts: more reuse per fetch
    def on_top_two(idx):
        return int(torch.bincount(idx.reshape(-1), minlength=8).sort(descending=True).values[:2].sum())
    assert on_top_two(gated) > on_top_two(native) + 5
    assert policy.router(PassKind.DRAFT, torch.arange(3)) is not None      # top-draft_experts draft
    with pytest.raises(ValueError, match="cap = 1 is out of range: accepted 2..8"):
        S2MoE(layout, config.decode, config.model.top_k, 0.25, 1)


def test_on_chip_buffer_must_hold_an_expert(setting):
    layout = setting[3]
    assert on_chip_slots(10_000, layout) == layout.n_experts
    with pytest.raises(ConfigError, match="policies.onchip_expert_kib = 0 holds no expert"):
        on_chip_slots(0, layout)


def test_every_study_builds_its_settings(setting, policy_overrides):
    from edgexpert.golden.studies.ablate import STUDIES, prefill_note, run_study, study_settings
    _, model, _, layout, _ = setting
    config = load_config(overrides=policy_overrides + ["policies.eval_prompt_tokens=6"])
    for study in STUDIES:
        settings = study_settings(study, config, model, layout)
        labels = [label for label, _ in settings]
        assert labels[0] == "naive_sd" and len(set(labels)) == len(labels) > 2
        # a study with EdgeXpert rows says they run without its prefill reuse
        assert (prefill_note(labels) is not None) == any(
            label.startswith("edgexpert") for label in labels)
        # these need the bundled encoder / checkpoint / an eagle head (tests/test_eagle.py)
        if study not in ("combined", "pruning", "draft", "tree"):
            assert all(make().name for _, make in settings)
    assert "without its prefill reuse" in prefill_note(["naive_sd", "edgexpert ratio=0.5"])
    with pytest.raises(ValueError, match="unknown study 'x': accepted calibration"):
        study_settings("x", config, model, layout)
    result = run_study("budget", config, model, [PROMPT], [PROMPT + [12, 13, 14]], None)
    assert result["naive_sd"]["ema_change_vs_naive_sd"] == 0.0
    assert all("top1_agreement" in m for m in result.values())
