"""The EAGLE draft head (golden/decoding/eagle/): deterministic training tied to its checkpoint,
the training-time test matching how the tree drafts, lossless drafting on both paths, the bundled
head, the draft setting of the policies and the bytes an eagle draft pass costs."""

import dataclasses
import json

import numpy as np
import pytest
import torch

from edgexpert.contracts.config import ConfigError, DecodeConfig, load_config
from edgexpert.contracts.trace import PassKind
from edgexpert.contracts.weight_layout import WeightLayout
from edgexpert.golden.lm.checkpoint import load_checkpoint, weights_sha256
from edgexpert.golden.decoding.decode import FloatEngine, decode_ar, decode_speculative, summarize
from edgexpert.golden.decoding.eagle.files import (EagleError, bundled_eagle_dir, load_eagle,
                                                  save_eagle)
from edgexpert.golden.decoding.eagle.head import EagleHead, EagleSettings, IntEagleHead
from edgexpert.golden.decoding.eagle.train import draft_vocabulary, train_eagle
from edgexpert.golden.integer.int_model import IntModel
from edgexpert.golden.lm.model import KVCache, MoEModel
from edgexpert.golden.policies.registry import PAPER_DRAFT, build_policy
from edgexpert.golden.decoding.policy import Policy

#: a head for the two-layer test model, trained for a few steps on a short random stream
TINY = EagleSettings(fused=(0, 1), ffn=32, window=24, batch=2, steps=3, unroll=3,
                     heldout_windows=2)
DECODE = DecodeConfig(max_new_tokens=16, max_depth=4, max_candidates=16, width=4, branch=3)


@pytest.fixture(scope="module")
def small(small_model):
    # MoE-Spec's budget and S2-MoE's cap within the small model's 8 experts
    config = load_config(overrides=small_model + ["policies.moe_spec_budget=4",
                                                  "policies.s2moe.cap=4"])
    torch.manual_seed(5)
    model = MoEModel(config.model).eval()
    with torch.no_grad():      # a peaked next-token distribution: long acceptance paths
        model.tok_emb.weight.mul_(8)
    stream = np.random.default_rng(0).integers(0, config.model.vocab_size, 4000).astype(np.int32)
    return config, model, stream


def _train(small, settings=TINY):
    _, model, stream = small
    torch.set_num_threads(1)
    return train_eagle(model, stream[:3000], stream[3000:], settings, progress=False,
                       log=lambda *a: None)


def test_short_training_is_bit_for_bit_reproducible_and_round_trips(small, tmp_path):
    head, meta = _train(small)
    again, meta_again = _train(small)
    for (name, a), (_, b) in zip(head.state_dict().items(), again.state_dict().items()):
        assert torch.equal(a, b), name
    assert {k: v for k, v in meta.items() if k != "train_seconds"} == \
        {k: v for k, v in meta_again.items() if k != "train_seconds"}
    assert meta["checkpoint_sha256"] == weights_sha256(small[1]) and meta["settings"]["seed"]
    save_eagle(head, meta, tmp_path)
    stored = json.loads((tmp_path / "meta.json").read_text())
    assert "train_seconds" not in stored
    loaded, _ = load_eagle(small[1], tmp_path)
    for (name, a), (_, b) in zip(head.state_dict().items(), loaded.state_dict().items()):
        assert torch.equal(a.float(), b), name
    other = MoEModel(small[0].model)
    with pytest.raises(EagleError, match="retrain it with `edgexpert draft train --install`"):
        load_eagle(other, tmp_path)


def test_the_unrolled_training_steps_are_what_the_tree_computes(small):
    """Step k of the training-time test at entry i is a depth-k node whose root is entry i - k:
    the same logits as running the entries, then the chain, through the decoding path."""
    _, model, _ = small
    torch.manual_seed(2)
    head = EagleHead(model, TINY).double().eval()
    head.embeddings, head._head = head.embeddings.double(), head._head.double()
    n, dim = 7, len(TINY.fused) * model.cfg.d_model
    features = torch.randn(1, n, dim, dtype=torch.float64)
    tokens = torch.randint(0, model.cfg.vocab_size, (1, n))
    with torch.no_grad():
        steps = head.unrolled(features, tokens, 3)
        i, k = 5, 2
        root = i - k
        cache = KVCache()
        out = head.step(head.fuse(features[0, :root + 1]), tokens[0, :root + 1], cache,
                        torch.ones(root + 1, root + 1, dtype=torch.bool).tril())
        feature = out[-1:]
        for depth in range(1, k + 1):
            allowed = torch.ones(1, len(cache) + 1, dtype=torch.bool)
            feature = head.step(feature, tokens[0, root + depth:root + depth + 1], cache, allowed)
    assert torch.allclose(head.logits(feature)[0], steps[k][0, i], atol=1e-9)


@pytest.mark.parametrize("path", ["float", "int"])
def test_eagle_drafting_is_lossless_on_a_small_model(small, path):
    config, model, _ = small
    head, _ = _train(small)
    engine = FloatEngine(model) if path == "float" else IntModel(model)
    policy = Policy(WeightLayout.for_model(model.cfg), DECODE, eagle=head)
    prompts = [[1, 2, 3, 4, 5, 6, 7, 8], [9], [17, 30, 2, 2, 41]]
    runs = []
    for prompt in prompts:
        ar = decode_ar(engine, prompt, DECODE)
        sd = decode_speculative(engine, prompt, DECODE, policy=policy)
        assert sd.tokens == ar.tokens
        runs.append(sd)
    kinds = summarize(runs)["pass_kinds"]
    assert kinds["draft"]["reads_target"] == 0 and kinds["draft"]["expert_bytes"] == 0
    assert kinds["draft"]["draft_head_bytes"] == head.weight_bytes()
    assert kinds["verify"]["reads_target"] == 1 and kinds["verify"]["draft_head_bytes"] == 0


def test_draft_vocabulary_and_head_bytes(small):
    config, model, stream = small
    vocab = draft_vocabulary(np.array([5, 5, 5, 2, 2, 9, 1]), 10, 2)
    assert vocab.tolist() == [2, 5]
    assert draft_vocabulary(stream, 300, 0) is None and draft_vocabulary(stream, 300, 300) is None
    full = EagleHead(model, TINY)
    small_vocab = EagleHead(model, TINY, torch.tensor([1, 4, 7]))
    d = model.cfg.d_model
    linear = ((2 * d) * d + 2 * d * 3 * d + d * d + 3 * d * 32 ) // 2 + 2 * (d + 3 * d + d + 2 * 32 + d)
    assert full.weight_bytes() == linear + 4 * d * 2 + model.cfg.vocab_size * (d + 2)
    assert full.weight_bytes() - small_vocab.weight_bytes() == (model.cfg.vocab_size - 3) * (d + 2)
    logits = small_vocab.full_logits(torch.randn(2, d))
    assert torch.isinf(logits).sum() == 2 * (model.cfg.vocab_size - 3)


def test_the_draft_setting_of_the_policies(small):
    config, model, _ = small
    layout = WeightLayout.for_model(model.cfg)
    head, _ = _train(small)
    paper = dataclasses.replace(config, policies=dataclasses.replace(config.policies, draft="paper"))
    for name, draft in PAPER_DRAFT.items():
        assert build_policy(name, paper, model, layout, eagle=head).draft == draft
    assert build_policy("ar", paper, model, layout).draft == "none"
    with pytest.raises(ConfigError, match="none was loaded: accepted policies.draft=self"):
        build_policy("edgexpert", paper, model, layout)
    with pytest.raises(ConfigError, match="s2moe cannot draft with the eagle head: its adaptive "
                                          "expansion"):
        build_policy("s2moe", config, model, layout, eagle=head, draft="eagle")
    everywhere = dataclasses.replace(config, policies=dataclasses.replace(config.policies,
                                                                         draft="eagle"))
    assert build_policy("specmoe", everywhere, model, layout, eagle=head).draft == "self"
    assert build_policy("moe_spec", everywhere, model, layout, eagle=head).draft == "eagle"
    assert build_policy("naive_sd", config, model, layout, eagle=head).draft == "self"


def test_combined_drafts_with_the_head_on_chip_over_its_own_tree_losslessly(small):
    config, model, _ = small
    layout = WeightLayout.for_model(model.cfg)
    head, _ = _train(small)
    tree = dataclasses.replace(config, decode=DECODE, policies=dataclasses.replace(
        config.policies, draft="paper",
        combined=dataclasses.replace(config.policies.combined, depth=2, candidates=5)))
    policy = build_policy("combined", tree, model, layout, eagle=head)
    assert (policy.draft, policy.onchip) == ("eagle", "reuse")
    assert (policy.decode.max_depth, policy.decode.max_candidates) == (2, 5)
    # its self-draft keeps the configured split and the decode tree
    own = build_policy("combined", tree, model, layout, eagle=head, draft="self")
    assert (own.onchip, own.decode.max_candidates) == ("configured", DECODE.max_candidates)
    engine = FloatEngine(model)
    for prompt in ([1, 2, 3, 4, 5, 6, 7, 8], [9]):
        run = decode_speculative(engine, prompt, policy.decode, policy=policy)
        assert run.tokens == decode_ar(engine, prompt, DECODE).tokens
        verify = [p for p in run.passes if p.kind == PassKind.VERIFY]
        assert all(p.tokens <= 5 + 1 for p in verify)        # the candidates and the root
        assert sum(p.kind == PassKind.DRAFT for p in run.passes) <= 2 * len(verify)
        # no expert slots: a verification fetches every expert its tokens used, whole
        assert all(p.bytes % layout.expert_fetch_bytes == 0 and p.bytes > 0 for p in verify)


def test_the_studies_that_draft_with_the_head_build_every_setting(small):
    from edgexpert.golden.studies.ablate import study_settings
    config, model, _ = small
    layout = WeightLayout.for_model(model.cfg)
    head, _ = _train(small)
    built = {study: {label: make() for label, make in study_settings(study, config, model, layout,
                                                                     eagle=head)}
             for study in ("draft", "combined", "tree")}
    assert built["draft"]["combined draft=eagle"].onchip == "reuse"
    steps = list(built["combined"].values())
    # the build-up: naive_sd on the small tree, then the head on chip on the full tree, then both
    assert [(p.name, p.onchip, p.decode.max_candidates) for p in steps[1:4]] == [
        ("naive_sd", "configured", config.policies.combined.candidates),
        ("combined", "reuse", config.decode.max_candidates),
        ("combined", "reuse", config.policies.combined.candidates)]
    assert steps[-1].draft == "self"
    trees = [(p.decode.max_depth, p.decode.max_candidates) for p in built["tree"].values()
             if p.name == "combined"]
    assert len(set(trees)) == len(trees) == len(built["tree"]) - 1


# ---------------------------------------------------------------------------------------------
# the bundled head


@pytest.fixture(scope="module")
def bundled():
    ckpt = load_checkpoint(None)
    head, meta = load_eagle(ckpt.model)
    return ckpt, head, meta


def test_the_bundled_head_belongs_to_the_bundled_checkpoint(bundled):
    ckpt, head, meta = bundled
    assert meta["checkpoint_sha256"] == weights_sha256(ckpt.model)
    assert meta["draft_pass_bytes"] == head.weight_bytes()
    assert (bundled_eagle_dir() / "eagle.safetensors").is_file()


def test_the_integer_head_drafts_what_the_float_head_drafts_mostly(bundled):
    """The A8W4 head on the integer target's features against the float head on the same ones:
    int4 weights move its features, rarely its top choice (89% on this prompt when written)."""
    from edgexpert.golden.lm.corpus import load_corpus
    from edgexpert.golden.lm.prompts import load_prompts
    ckpt, head, _ = bundled
    target = IntModel(ckpt.model)
    policy = Policy(WeightLayout.for_model(ckpt.model.cfg), DecodeConfig(), eagle=head)
    integer = policy.eagle_for(target)
    assert isinstance(integer, IntEagleHead) and policy.eagle_for(target) is integer
    assert policy.eagle_for(FloatEngine(ckpt.model)) is policy.eagle
    prompt = load_prompts(load_corpus(), ckpt.tokenizer, None)[0]
    n = len(prompt)
    _, traces = target.step(torch.tensor(prompt), torch.arange(n), KVCache(),
                            torch.ones(n, n, dtype=torch.bool).tril())
    features = torch.cat([traces[layer].output for layer in head.settings.fused], dim=-1)[:-1]
    allowed = torch.ones(n - 1, n - 1, dtype=torch.bool).tril()
    tokens = torch.tensor(prompt[1:])
    with torch.no_grad():
        exact = policy.eagle.full_logits(policy.eagle.step(policy.eagle.fuse(features), tokens,
                                                           KVCache(), allowed))
    ints = integer.step(integer.fuse(features), tokens, KVCache(), allowed)
    assert ints.dtype == torch.int64
    agree = (exact.argmax(-1) == integer.full_logits(ints).argmax(-1)).double().mean()
    assert agree > 0.8


@pytest.mark.parametrize("path", ["float", "int"])
def test_bundled_eagle_drafting_is_lossless_on_every_bundled_prompt(bundled, path):
    from edgexpert.golden.lm.corpus import load_corpus
    from edgexpert.golden.lm.prompts import load_prompts
    ckpt, head, _ = bundled
    cfg = DecodeConfig(max_new_tokens=10)
    engine = FloatEngine(ckpt.model) if path == "float" else IntModel(ckpt.model)
    policy = Policy(WeightLayout.for_model(ckpt.model.cfg), cfg, eagle=head)
    for prompt in load_prompts(load_corpus(), ckpt.tokenizer, None):
        ar = decode_ar(engine, prompt, cfg)
        assert decode_speculative(engine, prompt, cfg, policy=policy).tokens == ar.tokens


@pytest.mark.benchmark
def test_draft_train_reproduces_the_bundled_head(bundled, tmp_path):
    """`edgexpert draft train` with the bundled head's settings (minutes)."""
    from edgexpert.golden.lm.corpus import load_corpus
    from edgexpert.golden.lm.train import token_streams
    ckpt, head, meta = bundled
    raw = dict(meta["settings"])
    settings = EagleSettings(**{**raw, "fused": tuple(raw["fused"])})
    torch.set_num_threads(1)
    train_stream, heldout_stream = token_streams(load_corpus(), ckpt.tokenizer)
    again, _ = train_eagle(ckpt.model, train_stream, heldout_stream, settings, progress=False,
                           log=lambda *a: None)
    for (name, a), (_, b) in zip(head.state_dict().items(), again.state_dict().items()):
        assert torch.equal(a, b.float()), name


@pytest.mark.parametrize("args, message", [
    (["draft", "train", "--steps", "0"], "--steps 0 is out of range: accepted 1..1000000"),
    (["draft", "train", "--draft-vocab", "-1"], "--draft-vocab -1 is out of range: accepted "
                                                "0..1048576"),
    (["compare", "--set", "policies.draft=medusa"], "policies.draft"),
])
def test_draft_commands_reject_bad_arguments_in_one_line(args, message, capsys):
    from edgexpert.cli import main
    assert main(args) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1
