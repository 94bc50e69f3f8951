"""Fixtures shared by the plain tests."""

import random

import pytest
import torch

#: a model small enough for quick tests, in the bundled model's regime: many experts, top-k > 1,
#: SwiGLU experts narrower than d_model
SMALL_MODEL = ["model.vocab_size=300", "model.d_model=48", "model.n_layers=2", "model.n_heads=4",
               "model.n_experts=8", "model.top_k=2", "model.expert_ffn=16",
               "model.max_seq_len=128", "train.seq_len=64",
               # EdgeXpert's prefill budgets must fit top_k = 2
               "policies.prefill.budget_minor=2", "policies.prefill.budget_trivial=1",
               # the bundled EAGLE head drafts for the bundled model only (tests/test_eagle.py
               # builds heads for small models)
               "policies.draft=self"]


@pytest.fixture(scope="session")
def small_model() -> list[str]:
    """Configuration overrides of the small test model."""
    return list(SMALL_MODEL)


@pytest.fixture(scope="session")
def policy_overrides(small_model) -> list[str]:
    """The small model with the draft tree of the decoding-policy tests."""
    return small_model + ["decode.max_new_tokens=12", "decode.max_depth=3",
                          "decode.max_candidates=10", "decode.width=3", "decode.branch=3"]


@pytest.fixture(scope="session")
def loud_model():
    """Makes a random model of a config whose experts are scaled up, so that what they compute
    (and what a policy changes in it) shows in the logits."""
    from edgexpert.golden.lm.model import MoEModel

    def make(config, seed: int):
        torch.manual_seed(seed)
        model = MoEModel(config.model).eval()
        with torch.no_grad():
            for block in model.layers:
                for w in (block.moe.w_gate, block.moe.w_up, block.moe.w_down):
                    w.mul_(15)
        return model
    return make


@pytest.fixture(scope="session")
def corpus_root(tmp_path_factory):
    """A small corpus of Python-like files (and one a corpus must skip) for training tests."""
    root = tmp_path_factory.mktemp("corpus")
    rng = random.Random(0)
    words = ["def", "return", "self", "value", "items", "for", "in", "if", "else", "print"]
    for i in range(60):
        lines = [f"def f{i}_{j}(x):\n    return " + " ".join(rng.choice(words) for _ in range(8))
                 for j in range(20)]
        (root / f"mod{i}.py").write_text("\n".join(lines) + "\n")
    (root / "site-packages").mkdir()
    (root / "site-packages" / "ignored.py").write_text("x = 1\n")
    (root / "latin1.py").write_bytes("s = 'caf\xe9'\n".encode("latin-1"))
    return root


@pytest.fixture(scope="session")
def timed_run():
    """Makes a `bench top` run's timeline entries (the cycle file's `layers`, `split`,
    `beats_per_bin` and `cycles_per_beat`) by hand: a draft and a verification pass of two
    layers each from cycle `origin`, the draft layers' bus phases `bus` cycles long and the
    verification's 2 x `bus`."""
    from edgexpert.contracts.cycles import split

    def make(origin: int, bus: int) -> dict:
        layers, start = [], origin
        for index, kind, layer, head, beats, gaps, tail in (
                (0, "draft", 0, 100, bus, 50, 30), (0, "draft", 1, 80, bus, 20, 40),
                (1, "verify", 0, 120, 2 * bus, 300, 60), (1, "verify", 1, 100, 2 * bus, 200, 100)):
            end = start + head + beats + gaps + tail
            layers.append({"prompt": 0, "index": index, "layer": layer, "kind": kind,
                           "groups": 2, "candidates": 8, "busy": end - start,
                           "compute": beats + gaps, "memory_wait": head, "start": start, "end": end, "beats": beats,
                           "head": head, "bus": beats, "gaps": gaps, "tail": tail})
            start = end + 20    # the host reads the counters between layers
        bins = -(-(layers[-1]["end"] - origin) // 1024)
        return {"cycles_per_beat": 2.0, "layers": layers, "split": split(layers),
                "beats_per_bin": {"bin_cycles": 1024, "beats": [900] * bins}}
    return make
