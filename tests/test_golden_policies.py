"""Decoding policies: the base policy is naive speculative decoding exactly; EdgeXpert's
coalescing computes what it fetched and counts it once per pass; MoE-Spec keeps its budget; the
teacher-forced quality check is exact for policies that change nothing."""

import pytest
import torch

from edgexpert.contracts.config import load_config
from edgexpert.contracts.trace import PassKind
from edgexpert.golden.decoding.decode import FloatEngine, decode_ar, decode_speculative
from edgexpert.golden.studies.evaluate import quality, run_policy, teacher_forced
from edgexpert.golden.policies.edgexpert import CoalescingHook, EdgeXpert
from edgexpert.golden.policies.moe_spec import MoESpec
from edgexpert.golden.decoding.policy import Autoregressive, PassFetches, Policy
from edgexpert.golden.lm.prune import pruning_masks
from edgexpert.contracts.weight_layout import Matrix, WeightLayout



@pytest.fixture(scope="module")
def setting(policy_overrides, loud_model):
    config = load_config(overrides=policy_overrides)
    model = loud_model(config, seed=5)
    return config, model, FloatEngine(model), WeightLayout.for_model(config.model)


def test_base_policy_is_naive_speculative_decoding(setting):
    config, _, engine, layout = setting
    plain = decode_speculative(engine, [4, 5, 6], config.decode)
    policy = decode_speculative(engine, [4, 5, 6], config.decode, policy=Policy(layout, config.decode))
    assert plain.tokens == policy.tokens
    # whole experts, once per pass
    for p in plain.passes:
        assert p.bytes == sum(p.experts_per_layer) * layout.expert_fetch_bytes


def test_pass_fetches_count_each_channel_once():
    layout = WeightLayout(n_layers=1, n_experts=2, d_model=64, expert_ffn=32)
    f = PassFetches(layout)
    f.fetch(0, 1, Matrix.GATE_UP, [0, 1, 2, 10])
    first = f.bytes
    assert first == layout.scale_bytes(Matrix.GATE_UP) + layout.fetch_bytes(Matrix.GATE_UP, [0, 1, 2, 10]) \
        - layout.scale_bytes(Matrix.GATE_UP)
    f.fetch(0, 1, Matrix.GATE_UP, [1, 2, 3])   # only channel 3 is new: no second scale block
    assert f.bytes == first + layout.column_bytes(Matrix.GATE_UP)


def test_coalescing_selects_by_group_importance(setting):
    config, model, _, layout = setting
    masks = pruning_masks(model, 0.0)
    depths = torch.tensor([0, 1, 1, 2])
    hook = CoalescingHook(layout, depths, masks, ratio=0.25, calibration=True)
    x = torch.zeros(3, config.model.d_model, dtype=torch.float64)
    x[0, :12] = 5.0          # the depth-1 group: one candidate wants channels 0..11 strongly
    x[1, 30:42] = 1.0        # (12 = 25% of 48), the other 30..41 weakly
    x[2, 30:42] = 5.0        # the depth-2 candidate wants 30..41
    rows = torch.tensor([1, 2, 3])
    m = hook.gate_up(0, 3, rows, x, torch.ones(3, dtype=torch.float64))
    # the hook's rows 0 and 1 (pass tokens 1 and 2) share depth 1: one fetch of their summed
    # importance, used by both; row 2 (token 3) is depth 2 alone
    assert torch.equal(m[0], m[1]) and m[0][:12].sum() == 12 and m[0].sum() == 12
    assert m[2][30:42].sum() == 12 and m[2].sum() == 12
    # channels 0..11 and 30..41: two runs of 12 columns, each matrix's scale block once
    stride = layout.column_stride(Matrix.GATE_UP)
    runs = 2 * (11 * stride + layout.column_bytes(Matrix.GATE_UP))
    assert hook.bytes == layout.scale_bytes(Matrix.GATE_UP) + runs
    no_cal = CoalescingHook(layout, depths, masks, ratio=0.25, calibration=False)
    m2 = no_cal.gate_up(0, 3, rows, x, torch.ones(3, dtype=torch.float64))
    # without calibration the second depth-1 candidate keeps only what it would have chosen
    assert m2[1].sum() < m[1].sum() and torch.all(m2 <= m)


def test_pruning_masks(setting):
    _, model, _, _ = setting
    masks = pruning_masks(model, 0.25)
    assert masks[0][Matrix.GATE_UP].shape == (8, 48)
    assert torch.all(masks[1][Matrix.DOWN].sum(1) == 12)   # 16 - 25%
    with pytest.raises(ValueError, match="sparsity = 1.0 is out of range"):
        pruning_masks(model, 1.0)


def test_moe_spec_keeps_its_budget(setting):
    config, _, engine, layout = setting
    policy = MoESpec(layout, config.decode, config.model.top_k, budget=3)
    router = policy.router(PassKind.VERIFY, torch.tensor([1, 2, 3]))
    logits = torch.randn(10, 8, dtype=torch.float64)
    idx = router(0, logits, None)
    assert len(torch.unique(idx)) <= 3 and idx.shape == (10, 2)
    run = decode_speculative(engine, [4, 5, 6], config.decode, policy=policy)
    assert all(max(p.experts_per_layer) <= 3 for p in run.passes if p.kind == PassKind.VERIFY)
    with pytest.raises(ValueError, match="budget = 1 is out of range: accepted 2..8"):
        MoESpec(layout, config.decode, config.model.top_k, budget=1)


def test_teacher_forced_quality(setting):
    config, model, engine, layout = setting
    window = [3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8, 9, 7, 9, 3]
    for policy in (Autoregressive(layout, config.decode), Policy(layout, config.decode)):
        q = quality(engine, policy, [window], 6)
        assert q["predictions"] == 10
        assert q["top1_agreement"] == 1.0 and q["ppl_ratio"] == pytest.approx(1.0, abs=1e-9)
        assert q["mean_kl"] == pytest.approx(0.0, abs=1e-9)
    logits, passes, accepted = teacher_forced(engine, Policy(layout, config.decode), window, 6)
    assert logits.shape[0] == 10 and sum(accepted) + len(accepted) == 10
    # a policy that drops most channels changes the predictions
    lossy = EdgeXpert(layout, config.decode, model, ratio=0.1)
    assert quality(engine, lossy, [window], 6)["mean_kl"] > 1e-3


def test_run_policy_reports_greedy_match(setting):
    config, _, engine, layout = setting
    prompts = [[4, 5, 6], [7, 8]]
    reference = [decode_ar(engine, p, config.decode) for p in prompts]
    m = run_policy(engine, Policy(layout, config.decode), prompts, reference, None)
    assert m["greedy_sequence_match"] == 1.0 and m["greedy_prefix_match"] == 1.0
    assert m["ema_bytes_per_token_prefill"] > 0


def test_channel_policies_need_the_float_path(setting):
    from edgexpert.golden.integer.int_model import IntModel
    config, model, _, layout = setting
    with pytest.raises(ValueError, match="channel policies run on the float path"):
        decode_speculative(IntModel(model), [4, 5], config.decode,
                           policy=EdgeXpert(layout, config.decode, model))


def test_compare_reports_every_policy_with_the_promised_keys(setting, policy_overrides):
    from edgexpert.golden.studies.evaluate import compare
    _, model, _, _ = setting
    config = load_config(overrides=policy_overrides + ["policies.moe_spec_budget=4",
                                                           "policies.eval_prompt_tokens=6"])
    window = [3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8]
    result = compare(config, model, [[4, 5, 6]], [window], None)
    assert list(result) == ["ar", "naive_sd", "edgexpert", "moe_spec", "s2moe", "specmoe",
                            "specter", "combined"]
    for metrics in result.values():
        assert {"ema_bytes_per_token_decode", "ema_bytes_per_token_prefill", "tokens_per_step",
                "top1_agreement", "ppl_ratio", "ema_change_vs_naive_sd"} <= set(metrics)
    assert result["naive_sd"]["ema_change_vs_naive_sd"] == 0.0
    assert result["ar"]["tokens_per_step"] == 1.0


def test_bad_budget_names_the_key(setting, small_model):
    from edgexpert.contracts.config import ConfigError
    from edgexpert.golden.policies.registry import build_policies
    _, model, _, layout = setting
    config = load_config(overrides=small_model + ["policies.moe_spec_budget=12"])
    with pytest.raises(ConfigError, match="policies.moe_spec_budget: budget = 12 is out of range: accepted 2..8"):
        build_policies(config, model, layout)


def test_registry_builds_every_policy_by_its_name_from_the_config(setting, policy_overrides):
    from edgexpert.golden.policies.registry import COMPARED, POLICIES, build_policy, build_policies
    _, model, _, layout = setting
    config = load_config(overrides=policy_overrides + ["policies.moe_spec_budget=4",
                                                       "policies.prefill.chunk=5",
                                                       "policies.coalescing_ratio=0.6",
                                                       "policies.specter.chain=3"])
    assert set(COMPARED) < set(POLICIES) and len(set(COMPARED)) == len(COMPARED) == 8
    for name in POLICIES:
        policy = build_policy(name, config, model, layout)
        assert policy.name == name and policy.prefill_chunk == 5
    assert [p.name for p in build_policies(config, model, layout)] == list(COMPARED)
    assert build_policy("moe_spec", config, model, layout).budget == 4
    assert build_policy("edgexpert", config, model, layout).ratio == 0.6
    assert build_policy("specter", config, model, layout).decode.max_depth == 3
    with pytest.raises(ValueError, match="unknown policy 'x': accepted ar, naive_sd, edgexpert"):
        build_policy("x", config, model, layout)
