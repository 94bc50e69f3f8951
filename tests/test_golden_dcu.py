"""The DCU's integer contract (golden/blocks/dcu.py, docs/contracts.md "Depth coalescing"): the scale
alignment, the stated bounds, the one selection rule with its ties and the pruning mask, and the
policy's float selection going through it."""

import pytest
import torch

from edgexpert.golden.blocks import dcu
from edgexpert.golden.policies.edgexpert import integer_inputs, salient_channels, selected_count


def test_equal_real_scales_give_equal_weights():
    # m 2^-e = 2^14 2^-20 = 2^13 2^-19: the same scale written two ways weighs the same
    w = dcu.candidate_weights([2**14, 2**13], [20, 19], [30000, 30000])
    assert w[0] == w[1] == (2**13 * 30000) >> 15


def test_zero_rows_and_weights_do_not_set_the_exponent():
    # an all-zero row has m = e = 0; with it in the minimum the others would shift by 35 more
    w = dcu.candidate_weights([0, 9000, 9000], [0, 35, 36], [65536, 100, 200])
    assert w.tolist() == [0, (9000 * 100) >> 15, (9000 * 200) >> 16]
    assert dcu.candidate_weights([0, 0], [0, 0], [1, 2]).tolist() == [0, 0]


def test_the_largest_inputs_stay_within_the_stated_widths():
    n, c = dcu.MAX_CANDIDATES, 8
    q = torch.full((n, c), -127)
    m, e, g = [2**dcu.M_BITS - 1] * n, [7] * n, [dcu.G_MAX] * n
    w = dcu.candidate_weights(m, e, g)
    assert int(w.max()) < 2**dcu.WEIGHT_BITS
    imp = dcu.importance(q, m, e, g)
    assert int(imp.max()) < 2**dcu.IMPORTANCE_BITS
    assert int(dcu.selection_keys(q, m, e, g).max()) < 2**dcu.KEY_BITS


def test_ties_go_to_the_lower_channel_and_prune_is_never_chosen():
    q = torch.tensor([[0, 5, 5, 5, 0, 9, 0, 0]])
    one = ([10000], [20], [40000])
    assert dcu.select(q, *one, k=3).tolist() == [1, 2, 5]
    # an all-zero group selects the lowest channels
    assert dcu.select(torch.zeros(2, 8), [0, 0], [0, 0], [0, 0], k=3).tolist() == [0, 1, 2]
    prune = torch.tensor([0, 0, 1, 1, 1, 0, 1, 1])
    # channel 5 (importance 9) and 1 are pruned; among the unpruned, 2 and 3 (5) then 4 (0,
    # the lowest of the zero ones) - never pruned channel 0 although it ties at importance 0
    assert dcu.select(q, *one, k=3, prune=prune).tolist() == [2, 3, 4]
    # more asked than unpruned: only the unpruned; nothing unpruned: one channel
    assert dcu.select(q, *one, k=8, prune=prune).tolist() == [2, 3, 4, 6, 7]
    assert dcu.select(q, *one, k=8, prune=torch.zeros(8)).tolist() == [0]


def test_out_of_range_inputs_name_the_accepted_range():
    q = torch.zeros(1, 4)
    with pytest.raises(ValueError, match="input q = -128 is out of range: accepted -127..127"):
        dcu.importance(torch.tensor([[-128, 0]]), [1], [1], [1])
    with pytest.raises(ValueError, match="routing weight g = 65537 is out of range"):
        dcu.importance(q, [1], [1], [65537])
    with pytest.raises(ValueError, match=r"scale mantissa m = 32768 is out of range: accepted 0..32767"):
        dcu.importance(q, [32768], [1], [1])
    with pytest.raises(ValueError, match=r"accepted \[1..64, C\]"):
        dcu.importance(torch.zeros(65, 4), [1] * 65, [1] * 65, [1] * 65)


def test_the_policy_selects_through_the_integer_contract():
    gen = torch.Generator().manual_seed(3)
    values = torch.randn(5, 48, generator=gen, dtype=torch.float64)
    weights = torch.rand(5, generator=gen, dtype=torch.float64)
    prune = (torch.rand(48, generator=gen) > 0.25).to(torch.float64)
    q, m, e, g = integer_inputs(values, weights)
    assert int(q.abs().max()) == 127 and g.dtype == torch.int64
    chosen = salient_channels(values, weights, 0.5, prune)
    assert len(chosen) == selected_count(48, 0.5, prune)
    assert torch.equal(chosen, dcu.select(q, m, e, g, 24, prune))
    assert not set(chosen.tolist()) & set(torch.nonzero(prune == 0)[:, 0].tolist())
