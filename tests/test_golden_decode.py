"""Speculative decoding: lossless greedy output on both paths, a well-formed draft tree, exact
sampling distribution under stochastic acceptance, and the EMA accounting."""


import pytest
import torch

from edgexpert.contracts.config import load_config
from edgexpert.contracts.trace import PassKind
from edgexpert.golden.decoding.decode import (FloatEngine, Tree, _accept, build_tree, decode_ar,
                                     decode_speculative, prefill, summarize)
from edgexpert.golden.integer.int_model import IntModel
from edgexpert.golden.lm.model import MoEModel
from edgexpert.contracts.weight_layout import WeightLayout

DECODE = ["decode.max_new_tokens=20", "decode.max_depth=4", "decode.max_candidates=16",
          "decode.width=4", "decode.branch=3"]


@pytest.fixture(scope="module")
def config(small_model):
    return load_config(overrides=small_model + DECODE)


@pytest.fixture(scope="module")
def model(config):
    torch.manual_seed(1)
    m = MoEModel(config.model).eval()
    # a peaked next-token distribution makes drafts agree often, so acceptance paths get long
    with torch.no_grad():
        m.tok_emb.weight.mul_(8)
    return m


@pytest.mark.parametrize("path", ["float", "int"])
def test_greedy_speculative_equals_autoregressive(model, config, path):
    engine = FloatEngine(model) if path == "float" else IntModel(model)
    for prompt in ([5, 17, 42], [1, 2, 3, 4, 5, 6, 7, 8], [299]):
        ar = decode_ar(engine, prompt, config.decode)
        sd = decode_speculative(engine, prompt, config.decode)
        assert sd.tokens == ar.tokens
        assert len(ar.tokens) == config.decode.max_new_tokens
        assert sd.steps <= ar.steps


def test_tree_is_well_formed(model, config):
    engine = IntModel(model)
    cache, _ = prefill(engine, [3, 9, 27, 81])
    passes = []
    tree = build_tree(engine, cache, 81, config.decode, passes)
    d = config.decode
    assert 0 < len(tree.tokens) <= d.max_candidates
    assert max(tree.depths) <= d.max_depth and len(passes) == d.max_depth
    for i, parent in enumerate(tree.parents):
        assert parent < i  # parents come first
        assert tree.depths[i] == (1 if parent < 0 else tree.depths[parent] + 1)
        if parent >= 0:
            assert tree.scores[i] <= tree.scores[parent] + 1e-12
    # drafting leaves the target's cache untouched
    assert len(cache) == 3


def test_stochastic_acceptance_samples_the_target_distribution():
    """Children drafted deterministically, accepted with the residual probability: the first
    token must follow the target's distribution exactly (chi-square over 20,000 draws)."""
    vocab = 6
    logits = torch.tensor([[1.0, 0.2, -0.5, 0.8, 0.0, -1.0], [0.0] * vocab, [0.0] * vocab])
    tree = Tree(tokens=[3, 0], parents=[-1, -1], depths=[1, 1], scores=[-1.0, -1.2])
    cfg = load_config(overrides=["decode.temperature=1.0"]).decode
    gen = torch.Generator().manual_seed(7)
    counts = torch.zeros(vocab)
    draws = 20000
    for _ in range(draws):
        path, bonus = _accept(logits, tree, cfg, gen)
        counts[tree.tokens[path[0]] if path else bonus] += 1
    expected = torch.softmax(logits[0], -1) * draws
    chi2 = float(((counts - expected) ** 2 / expected).sum())
    assert chi2 < 20.5  # p = 0.001 for 5 degrees of freedom


def test_sampling_is_seeded(model, small_model):
    cfg = load_config(overrides=small_model + DECODE + ["decode.temperature=0.8"]).decode
    engine = IntModel(model)
    a = decode_speculative(engine, [4, 8], cfg)
    b = decode_speculative(engine, [4, 8], cfg)
    assert a.tokens == b.tokens and len(a.tokens) == cfg.max_new_tokens


def test_ema_accounting(model, config):
    engine = IntModel(model)
    layout = WeightLayout.for_model(model.cfg)
    ar = decode_ar(engine, [7, 7, 7], config.decode)
    m = summarize([ar])
    # autoregressive: every step fetches top_k experts in every layer
    assert m["experts_per_step"] == model.cfg.top_k * model.cfg.n_layers
    assert m["ema_bytes_per_token"] == m["experts_per_step"] * layout.expert_fetch_bytes
    sd = summarize([decode_speculative(engine, [7, 7, 7], config.decode)])
    assert sd["ema_bytes_per_token"] == sd["ema_bytes_per_token_verify"] + sd["ema_bytes_per_token_draft"]
    assert sd["tokens_per_step"] == pytest.approx(1 + sd["acceptance_length"], abs=0.2)
    assert sd["experts_per_step"] <= model.cfg.n_experts * model.cfg.n_layers


def test_pass_kinds_count_each_pass_and_the_cache_it_reads(model, config):
    engine = IntModel(model)
    ar = decode_ar(engine, [7, 7, 7], config.decode)
    # the prompt but its last token is prefilled; step i then attends to 2 + i cached entries
    contexts = [p.context for p in ar.passes if p.kind == PassKind.AR]
    assert contexts == list(range(2, 2 + ar.steps))
    kinds = summarize([ar])["pass_kinds"]
    assert set(kinds) == {"ar"}
    assert kinds["ar"] == {"runs_per_step": 1.0, "tokens": 1.0,
                           "context": sum(contexts) / len(contexts),
                           "expert_bytes": pytest.approx(sum(p.bytes for p in ar.passes
                                                             if p.kind == PassKind.AR) / ar.steps),
                           "draft_head_bytes": 0.0, "reads_target": 1.0}
    sd = decode_speculative(engine, [7, 7, 7], config.decode)
    kinds = summarize([sd])["pass_kinds"]
    verify = [p for p in sd.passes if p.kind == PassKind.VERIFY]
    draft = [p for p in sd.passes if p.kind == PassKind.DRAFT]
    assert kinds["verify"]["runs_per_step"] == 1.0 and len(verify) == sd.steps
    assert kinds["draft"]["runs_per_step"] == pytest.approx(len(draft) / sd.steps)
    # within a step, each draft level reads the prefix and the entries the earlier levels
    # wrote; verification reads the prefix only (the tree's entries are its own tokens)
    level = []
    for p in sd.passes[1:]:
        if p.kind == PassKind.DRAFT:
            assert not level or p.context == level[-1].context + level[-1].tokens
            level.append(p)
        else:
            assert level and p.context == level[0].context
            level = []
    assert kinds["verify"]["tokens"] == pytest.approx(sum(p.tokens for p in verify) / sd.steps)
    # runs x mean bytes per kind gives back the routed-expert bytes per token exactly
    summary = summarize([sd])
    per_step = sum(k["runs_per_step"] * k["expert_bytes"] for k in kinds.values())
    assert round(per_step / summary["tokens_per_step"]) == pytest.approx(
        summary["ema_bytes_per_token"], abs=1)
