"""The shipped checkpoint: it loads, its held-out loss is what its metadata says, it beats a
bigram model by a wide margin, and it fits the size budget."""

import hashlib

import pytest

from edgexpert.golden.lm.checkpoint import bundled_checkpoint_dir, load_checkpoint
from edgexpert.golden.lm.corpus import load_corpus
from edgexpert.golden.lm.train import eval_windows, heldout_loss, token_streams


@pytest.fixture(scope="module")
def shipped():
    return load_checkpoint()


def test_size_budget():
    assert (bundled_checkpoint_dir() / "model.safetensors").stat().st_size <= 16 * 2**20


def test_heldout_loss_matches_metadata(shipped):
    meta = shipped.meta
    corpus = load_corpus()
    assert corpus.manifest_hash == meta["corpus"]["manifest_sha256"], (
        "this machine's standard library differs from the one the checkpoint was trained on")
    assert hashlib.sha256(shipped.tokenizer.to_str().encode()).hexdigest() == meta["tokenizer_sha256"]
    _, heldout = token_streams(corpus, shipped.tokenizer)
    windows = eval_windows(heldout, meta["eval"]["seq_len"], meta["eval"]["windows"])
    loss = heldout_loss(shipped.model, windows)
    assert loss == pytest.approx(meta["heldout_loss"], abs=2e-3)
    # a wide margin over the best bigram model of the same data
    assert loss < meta["bigram_heldout_loss"] - 0.75


def test_metadata_records_provenance(shipped):
    meta = shipped.meta
    assert meta["command"].startswith("edgexpert train")
    assert meta["seed"] == meta["train"]["seed"]
    assert meta["model"]["n_experts"] >= 32 and meta["model"]["top_k"] >= 4


def test_safetensors_follow_the_umask_with_safetensors_bytes(tmp_path):
    import os

    import torch
    from safetensors.torch import save

    from edgexpert.golden.lm.checkpoint import save_tensors
    tensors = {"a": torch.arange(6, dtype=torch.float16).view(2, 3), "b": torch.ones(4)}
    umask = os.umask(0o022)
    try:
        path = save_tensors(tensors, tmp_path / "x.safetensors")
    finally:
        os.umask(umask)
    assert path.stat().st_mode & 0o777 == 0o644     # safetensors' save_file gives 0600
    assert path.read_bytes() == save(tensors)
