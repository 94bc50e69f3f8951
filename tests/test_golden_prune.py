"""EdgeXpert's pruning mask with recovery training (golden/lm/prune.py): the pruned columns stay
zero through fine-tuning, the run is deterministic, the checkpoint records its parent and is
refused with any other, pruned channels are never fetched, and quality can be measured against
another model than the one the policy runs on."""

import math

import pytest
import torch

from edgexpert.cli import main
from edgexpert.contracts.config import load_config
from edgexpert.golden.lm.checkpoint import CheckpointError, load_checkpoint, weights_sha256
from edgexpert.golden.lm.corpus import load_corpus
from edgexpert.golden.decoding.decode import FloatEngine
from edgexpert.golden.studies.evaluate import quality
from edgexpert.golden.lm.model import MoEModel
from edgexpert.golden.policies.edgexpert import CoalescingHook
from edgexpert.golden.policies.registry import build_policies
from edgexpert.golden.decoding.policy import Policy
from edgexpert.golden.lm.prune import (MASK_RULE, bundled_pruned_dir, load_pruned_checkpoint,
                                    pruning_masks, recover)
from edgexpert.golden.lm.train import token_streams, train
from edgexpert.contracts.weight_layout import Matrix, WeightLayout

TRAIN = ["train.batch_size=2", "train.steps=2", "train.warmup_steps=1", "train.eval_windows=2",
         "train.threads=1"]
SPARSITY = 0.25


@pytest.fixture(scope="module")
def pruned(tmp_path_factory, small_model, corpus_root):
    """(config, parent checkpoint, two pruned checkpoints from identical runs)."""
    config = load_config(overrides=small_model + TRAIN)
    root = tmp_path_factory.mktemp("prune")
    train(config, root / "parent", "t", progress=False, corpus_root=corpus_root)
    for name in ("a", "b"):
        recover(config, SPARSITY, 3, 1e-3, root / name, "edgexpert prune (test)",
                parent=root / "parent", progress=False, corpus_root=corpus_root)
    return config, load_checkpoint(root / "parent"), root / "a", root / "b"


def test_mask_held_at_zero_and_the_rest_trained(pruned):
    _, parent, a, _ = pruned
    masks = pruning_masks(parent.model, SPARSITY)
    model = load_checkpoint(a).model
    for block, before, m in zip(model.layers, parent.model.layers, masks):
        gate_up, down = m[Matrix.GATE_UP].bool(), m[Matrix.DOWN].bool()
        assert int((~gate_up).sum()) == round(SPARSITY * gate_up.shape[1]) * gate_up.shape[0]
        for w, w0, keep in ((block.moe.w_gate, before.moe.w_gate, gate_up),
                            (block.moe.w_up, before.moe.w_up, gate_up),
                            (block.moe.w_down, before.moe.w_down, down)):
            columns = keep[:, None, :].expand_as(w)
            assert torch.all(w[~columns] == 0)
            assert not torch.equal(w[columns], w0[columns])
    # the stored mask is the pruned model's own: the same rule finds the same columns
    for m, own in zip(masks, pruning_masks(model, SPARSITY)):
        assert all(torch.equal(m[k], own[k]) for k in m)


def test_recovery_is_deterministic_and_meta_records_it(pruned, corpus_root):
    _, parent, a, b = pruned
    assert (a / "model.safetensors").read_bytes() == (b / "model.safetensors").read_bytes()
    meta = load_checkpoint(a).meta
    prune = meta["prune"]
    assert prune["sparsity"] == SPARSITY and prune["steps"] == 3 and prune["mask_rule"] == MASK_RULE
    assert prune["parent_weights_sha256"] == weights_sha256(parent.model)
    assert meta["seed"] == meta["train"]["seed"] and meta["train"]["steps"] == 3
    # masking without recovery loses; recovery wins some of it back
    assert prune["masked_heldout_loss"] > prune["parent_heldout_loss"]
    assert math.isfinite(meta["heldout_loss"])
    # the parent and the corpus by folder name, no wall time
    assert prune["parent"] == parent.path.name and "train_seconds" not in prune
    assert meta["corpus"]["root"] == corpus_root.name


def test_pruned_checkpoint_refused_with_another_parent(pruned):
    config, parent, a, _ = pruned
    assert load_pruned_checkpoint(a, parent.model).meta["prune"]["sparsity"] == SPARSITY
    torch.manual_seed(1)
    with pytest.raises(CheckpointError, match=r"was pruned from weights [0-9a-f]{16}, not from "
                                              r"this model's [0-9a-f]{16}: rerun edgexpert prune"):
        load_pruned_checkpoint(a, MoEModel(config.model))
    with pytest.raises(CheckpointError, match="is not a pruned checkpoint"):
        load_pruned_checkpoint(parent.path, parent.model)


def test_pruned_channels_are_never_fetched(pruned):
    config, _, a, _ = pruned
    model = load_checkpoint(a).model
    masks = pruning_masks(model, SPARSITY)
    layout = WeightLayout.for_model(config.model)
    hook = CoalescingHook(layout, torch.zeros(3, dtype=torch.long), masks, ratio=1.0,
                          calibration=True)
    x = torch.rand(3, config.model.d_model, dtype=torch.float64) + 0.1
    chosen = hook.gate_up(0, 2, torch.arange(3), x, torch.ones(3, dtype=torch.float64))
    kept = masks[0][Matrix.GATE_UP][2]
    assert torch.equal(chosen, kept.expand(3, -1).to(chosen.dtype))
    assert hook.fetches.resident[(0, 2, Matrix.GATE_UP)] == set(torch.nonzero(kept)[:, 0].tolist())


def test_quality_against_a_separate_reference(pruned, corpus_root):
    config, parent, a, _ = pruned
    model = load_checkpoint(a).model
    _, heldout = token_streams(load_corpus(corpus_root), parent.tokenizer)
    windows = [heldout[:24].tolist()]
    layout, d = WeightLayout.for_model(config.model), config.decode
    own, exact = FloatEngine(model), FloatEngine(parent.model)
    assert quality(own, Policy(layout, d), windows, 16)["mean_kl"] == 0
    assert quality(own, Policy(layout, d), windows, 16, reference=exact)["mean_kl"] > 0


def test_bundled_pruned_checkpoint_drives_compare():
    assert (bundled_pruned_dir() / "model.safetensors").stat().st_size <= 16 * 2**20
    parent = load_checkpoint()
    ckpt = load_pruned_checkpoint(None, parent.model)
    prune = ckpt.meta["prune"]
    # installed because recovery brought it within 2% of the bundled model's held-out loss
    assert ckpt.meta["heldout_loss"] <= 1.02 * parent.meta["heldout_loss"] < prune["masked_heldout_loss"]
    # the self-draft: the bundled EAGLE head is tested with the unpruned model (test_eagle.py)
    config = load_config(overrides=["policies.pruned_checkpoint=bundled", "policies.draft=self"])
    layout = WeightLayout.for_model(parent.model.cfg)
    edgexpert = next(p for p in build_policies(config, parent.model, layout) if p.name == "edgexpert")
    assert edgexpert.model is not None and edgexpert.model is not parent.model
    for m, own in zip(edgexpert.masks, pruning_masks(ckpt.model, prune["sparsity"])):
        assert all(torch.equal(m[k], own[k]) for k in m)
    default = load_config(overrides=["policies.draft=self"])
    assert all(p.model is None for p in build_policies(default, parent.model, layout))


@pytest.mark.parametrize("value", ["0", "1.5", "nan", "-0.1"])
def test_bad_sparsity_is_one_line(value, capsys):
    assert main(["prune", "--sparsity", value, "--steps", "1"]) == 2
    err = capsys.readouterr().err
    assert err == f"edgexpert: error: sparsity = {float(value)} is out of range: accepted (0.0, 0.95]\n"
