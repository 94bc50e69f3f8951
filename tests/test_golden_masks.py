"""Depth-coalesced channel masks from golden traces: the selection is the stated importance, the
ratio holds, and steps are packed expert by expert within what fits."""

import numpy as np
import pytest
import torch

from edgexpert.contracts.config import load_config
from edgexpert.contracts.trace import PassKind
from edgexpert.golden.decoding.decode import decode_speculative
from edgexpert.golden.integer.int_model import IntModel
from edgexpert.golden.traces.masks import coalesced_masks
from edgexpert.golden.lm.model import MoEModel
from edgexpert.golden.traces.decode_trace import build_trace
from edgexpert.contracts.weight_layout import Matrix

DECODE = ["decode.max_new_tokens=8", "decode.max_depth=3", "decode.max_candidates=10",
          "decode.width=3", "decode.branch=3"]


@pytest.fixture(scope="module")
def trace(small_model):
    config = load_config(overrides=small_model + DECODE)
    torch.manual_seed(4)
    engine = IntModel(MoEModel(config.model).eval())
    runs = [decode_speculative(engine, [3, 1, 4, 1, 5], config.decode, keep_traces=True)]
    return build_trace(runs, config.model, config.decode, {})


def test_ratio_and_importance(trace):
    masks = coalesced_masks(trace, 0.25)
    entries = [e for step in masks.steps for e in step]
    assert all(len(e.channels) == (12 if e.matrix == Matrix.GATE_UP else 4) for e in entries)
    # recompute the first entry's selection by hand from the contract (docs/contracts.md, "Depth
    # coalescing"): W_c = m g 2^(16 - S - e) with S the largest bitlen(m) + bitlen(g) - e of a
    # candidate with m g > 0, keys 2 I + 1
    first = entries[0]
    verify = np.flatnonzero(trace["row_kind"] == PassKind.VERIFY)
    layer_rows = verify[trace["row_layer"][verify] == first.layer]
    rows = layer_rows[trace["row_pass"][layer_rows] == trace["row_pass"][layer_rows].min()]
    group = rows[trace["row_depth"][rows] == trace["row_depth"][rows].min()]
    users = [(r, k) for r in group for k, e in enumerate(trace["experts"][r]) if e == first.expert]
    products = {(r, k): int(trace["x_m"][r]) * int(trace["weights_q16"][r, k]) for r, k in users}
    def size(r, k):
        return (int(trace["x_m"][r]).bit_length() + int(trace["weights_q16"][r, k]).bit_length()
                - int(trace["x_e"][r]))
    top = max(size(r, k) for r, k in users if products[r, k] > 0)
    keys = [1] * 48
    for r, k in users:
        shift = int(trace["x_e"][r]) + top - 16
        w = products[r, k] >> shift if shift >= 0 else products[r, k] << -shift
        for j in range(48):
            keys[j] += 2 * abs(int(trace["x_q"][r, j])) * w
    assert first.channels == tuple(sorted(sorted(range(48), key=lambda j: (-keys[j], j))[:12]))


def test_packing_keeps_experts_whole(trace):
    masks = coalesced_masks(trace, 0.5, fits=lambda entries: len({e.expert for e in entries}) <= 2)
    for step in masks.steps:
        assert len({e.expert for e in step}) <= 2
    experts_per_step = [{(e.layer, e.expert) for e in step} for step in masks.steps]
    unpacked = coalesced_masks(trace, 0.5)
    assert sum(len(s) for s in masks.steps) == sum(len(s) for s in unpacked.steps)
    assert len(masks.steps) > len(unpacked.steps) and all(experts_per_step)
    with pytest.raises(ValueError, match="alone does not fit one EMA step"):
        coalesced_masks(trace, 0.5, fits=lambda entries: len(entries) < 2)
    with pytest.raises(ValueError, match="ratio = 0 is out of range"):
        coalesced_masks(trace, 0)
