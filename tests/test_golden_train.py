"""Training end to end on a small corpus (conftest.py): deterministic, and the stored metadata
is what the stored weights give."""

import json

import pytest

from edgexpert.contracts.config import load_config
from edgexpert.golden.lm.checkpoint import CheckpointError, load_checkpoint
from edgexpert.golden.lm.corpus import load_corpus
from edgexpert.golden.lm.train import eval_windows, heldout_loss, token_streams, train

TINY = ["model.vocab_size=300", "model.d_model=32", "model.n_layers=1", "model.n_heads=2",
        "model.n_experts=4", "model.top_k=2", "model.expert_ffn=16", "model.max_seq_len=64",
        "train.seq_len=32", "train.batch_size=4", "train.steps=6", "train.warmup_steps=2",
        "train.eval_windows=4", "train.threads=1",
        # EdgeXpert's prefill budgets must fit top_k = 2
        "policies.prefill.budget_minor=2", "policies.prefill.budget_trivial=1"]


def test_corpus_split_and_manifest(corpus_root):
    corpus = load_corpus(corpus_root)
    assert corpus.skipped == ("latin1.py",)
    assert all("site-packages" not in f.path for f in corpus.files)
    assert 0 < corpus.count(True)[0] < corpus.count(False)[0]
    assert load_corpus(corpus_root).manifest_hash == corpus.manifest_hash


def test_training_is_deterministic_and_metadata_is_true(tmp_path, corpus_root):
    config = load_config(overrides=TINY)
    meta_a = train(config, tmp_path / "a", "edgexpert train (test)", progress=False, corpus_root=corpus_root)
    meta_b = train(config, tmp_path / "b", "edgexpert train (test)", progress=False, corpus_root=corpus_root)
    assert (tmp_path / "a" / "model.safetensors").read_bytes() == (tmp_path / "b" / "model.safetensors").read_bytes()
    assert meta_a["heldout_loss"] == meta_b["heldout_loss"]
    for key in ("seed", "corpus", "heldout_loss", "bigram_heldout_loss", "command", "train", "model"):
        assert key in meta_a
    ckpt = load_checkpoint(tmp_path / "a")
    corpus = load_corpus(corpus_root)
    _, heldout = token_streams(corpus, ckpt.tokenizer)
    loss = heldout_loss(ckpt.model, eval_windows(heldout, 32, 4))
    assert loss == pytest.approx(meta_a["heldout_loss"], abs=1e-4)
    assert meta_a["corpus"]["manifest_sha256"] == corpus.manifest_hash
    # stored: the corpus by folder name, no wall time; the run reports its speed
    stored = json.loads((tmp_path / "a" / "meta.json").read_text())
    assert stored["corpus"]["root"] == corpus_root.name
    assert "train_seconds" not in stored and "train_tokens_per_second" not in stored
    assert meta_a["train_seconds"] > 0 and meta_a["train_tokens_per_second"] > 0
    assert (tmp_path / "a" / "model.safetensors").stat().st_mode & 0o044 == 0o044  # readable by all


def test_broken_checkpoints(tmp_path, corpus_root):
    config = load_config(overrides=TINY)
    train(config, tmp_path, "t", progress=False, corpus_root=corpus_root)
    meta = json.loads((tmp_path / "meta.json").read_text())
    (tmp_path / "meta.json").write_text(json.dumps({**meta, "model": {**meta["model"], "d_model": 48}}))
    with pytest.raises(CheckpointError, match=r"tok_emb.weight has shape \(300, 32\), the config needs \(300, 48\)"):
        load_checkpoint(tmp_path)
    (tmp_path / "meta.json").write_text(json.dumps({**meta, "meta_version": 7}))
    with pytest.raises(CheckpointError, match="meta_version 7: accepted 1"):
        load_checkpoint(tmp_path)
    (tmp_path / "meta.json").write_text("{")
    with pytest.raises(CheckpointError, match="is not valid JSON"):
        load_checkpoint(tmp_path)
    (tmp_path / "meta.json").write_text(json.dumps({**meta, "model": {**meta["model"], "top_k": 9}}))
    with pytest.raises(CheckpointError, match="model.top_k = 9 is out of range"):
        load_checkpoint(tmp_path)
    (tmp_path / "model.safetensors").write_bytes(b"\0" * 16)
    (tmp_path / "meta.json").write_text(json.dumps(meta))
    with pytest.raises(CheckpointError, match="is not a safetensors file"):
        load_checkpoint(tmp_path)
    (tmp_path / "tokenizer.json").unlink()
    with pytest.raises(CheckpointError, match="has no tokenizer.json"):
        load_checkpoint(tmp_path)
