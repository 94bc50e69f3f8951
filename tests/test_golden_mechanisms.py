"""`edgexpert mechanisms`' measurements (golden/studies/mechanisms.py) on a small random model:
what the recorders count against what the policies fetch, and the sharing count."""

import dataclasses

import torch

from edgexpert.contracts.config import load_config
from edgexpert.golden.lm.model import MoEModel
from edgexpert.golden.policies.prefill import EncoderSettings, TokenEncoder
from edgexpert.golden.studies.analysis import group_sharing
from edgexpert.golden.studies.mechanisms import HOT_SHARE, mechanisms


def test_group_sharing_counts_candidates_and_pairs():
    # a and b share 3 experts, c shares at most 1 with either
    found = group_sharing([{1, 2, 3, 4}, {1, 2, 3, 5}, {4, 6, 7, 8}], 3)
    assert found == {"groups": 1, "candidates": 3, "sharing": 2, "pairs": 3, "sharing_pairs": 1}
    assert group_sharing([{1, 2, 3, 4}, {1, 2, 3, 5}], 4)["sharing"] == 0


def test_mechanisms_on_a_small_model(small_model):
    # prefill budgets of one expert: a minor or trivial token keeps its top-1, which native
    # top-K routing uses too, so a chunk can only lose experts to the reuse
    config = load_config(overrides=small_model + [
        "decode.max_new_tokens=6", "decode.max_depth=3", "decode.max_candidates=8",
        "policies.coalescing_ratio=0.5", "policies.eval_windows=1",
        "policies.eval_prompt_tokens=24", "policies.eval_continuation=8",
        "policies.prefill.budget_minor=1", "policies.prefill.budget_trivial=1",
        "policies.prefill.tau_major=1.5", "policies.prefill.tau_minor=1.0"])
    torch.manual_seed(7)
    model = MoEModel(config.model).eval()
    encoder = TokenEncoder(model.tok_emb.weight.detach(),
                           dataclasses.replace(EncoderSettings(), width=16, heads=2)).eval()
    windows = torch.randint(0, 300, (2, 32)).tolist()
    p = config.policies
    result = mechanisms(config, model, [[5, 6, 7, 8]], windows[:1],
                        [w[:p.eval_prompt_tokens] for w in windows], None, encoder, None)
    decode = result["decode"]
    # coalescing at half the channels fetches less per step than whole experts
    assert decode["edgexpert"]["ema_bytes_per_step"] < decode["naive_sd"]["ema_bytes_per_step"]
    assert decode["saving_per_step"] == round(1 - decode["edgexpert"]["ema_bytes_per_step"]
                                              / decode["naive_sd"]["ema_bytes_per_step"], 4)
    for matrix in ("gate_up", "down"):
        stats = decode["explanation"][matrix]
        # the hottest quarter holds at least its share; the selection keeps the most important
        # half (the DCU's integer order), so at least about half the importance
        assert HOT_SHARE <= stats["hot_quarter_importance"] <= 1
        assert 0.45 <= stats["selected_importance"] <= 1
        # a pass fetches at least the ratio of a matrix it uses, and never more than all of it
        assert 0.5 <= stats["pass_fetched_share"] <= 1
        assert 0 < stats["own_channels_selected"] <= 1 and stats["candidates_per_group"] >= 1
    sharing = decode["explanation"]["coactivation"]
    assert sharing["groups"] > 0 and 0 <= sharing["pair_fraction"] <= sharing[
        "candidate_fraction"] <= 1
    prefill, seen = result["prefill"], result["prefill"]["explanation"]
    assert prefill["prefill_bytes_per_token"] <= prefill["native_prefill_bytes_per_token"]
    assert seen["chunk_experts_reuse"] <= seen["chunk_experts_native"] <= config.model.n_experts
    assert 0 <= seen["shared_set_share"] <= 1 and 0 <= seen["major_share"] <= 1
