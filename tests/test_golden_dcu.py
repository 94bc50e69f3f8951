"""The DCU's integer contract (golden/blocks/dcu.py, docs/contracts.md "Depth coalescing"): the scale
alignment, the stated bounds, the one selection rule with its ties and the pruning mask, and the
policy's float selection going through it."""

import numpy as np
import pytest
import torch

from edgexpert.contracts.dcu import DcuJob, encode_job
from edgexpert.contracts.weight_layout import Matrix, WeightLayout
from edgexpert.golden.blocks import dcu
from edgexpert.golden.policies.edgexpert import integer_inputs, salient_channels, selected_count


def test_equal_real_scales_give_equal_weights():
    # m 2^-e = 2^14 2^-20 = 2^13 2^-19: the same scale written two ways weighs the same; sizes
    # 15 + 15 - 20 = 14 + 15 - 19 = 10 = S, so W = m g 2^(16 - 10 - e)
    w = dcu.candidate_weights([2**14, 2**13], [20, 19], [30000, 30000])
    assert w[0] == w[1] == 30000


def test_the_shared_scale_follows_the_weighted_scales():
    # issue 28: A (m 8257, e 20, g 1) and B (m 16000, e 36, g 65536); B's weighted scale
    # 16000 * 2^16 * 2^-36 is 1.94x A's 8257 * 2^-20. With E = min e = 20 (the exponents alone)
    # both weights were 0: A's 8257 >> 15, B's 2^29.97 >> 31. Sizes: 14 + 1 - 20 = -5 and
    # 14 + 17 - 36 = -5, S = -5: A shifted left by 1, B right by 15
    w = dcu.candidate_weights([8257, 16000], [20, 36], [1, 65536])
    assert w.tolist() == [8257 * 2, (16000 * 65536) >> 15]
    # B's important channels are chosen, not the fallback 0..k-1 (A's here)
    q = torch.zeros(2, 8, dtype=torch.int64)
    q[0, :2], q[1, 6:] = 127, 127
    assert dcu.select(q, [8257, 16000], [20, 36], [1, 65536], k=2).tolist() == [6, 7]


def test_the_largest_weight_has_fifteen_or_sixteen_bits():
    gen = torch.Generator().manual_seed(5)
    for _ in range(200):
        n = int(torch.randint(1, 9, (1,), generator=gen))
        m = torch.randint(1, 2**15, (n,), generator=gen)
        e = torch.randint(-128, 128, (n,), generator=gen)
        g = torch.randint(1, dcu.G_MAX + 1, (n,), generator=gen)
        w = dcu.candidate_weights(m, e, g)
        assert 2**14 <= int(w.max()) < 2**dcu.WEIGHT_BITS


def test_zero_rows_and_weights_do_not_set_the_scale():
    # an all-zero row is quantized with m = e = 0 (quantize_vec): P = 0, it sets nothing; sizes
    # 14 + 7 - 35 = -14 and 14 + 8 - 36 = -14 = S; with the zero row's size 0 + 17 - 0 in the
    # maximum both others would be 0
    w = dcu.candidate_weights([0, 9000, 9000], [0, 35, 36], [65536, 100, 200])
    assert w.tolist() == [0, (9000 * 100) >> (35 - 14 - 16), (9000 * 200) >> (36 - 14 - 16)]
    assert w[1:].tolist() == dcu.candidate_weights([9000, 9000], [35, 36], [100, 200]).tolist()
    # a zero routing weight likewise
    assert dcu.candidate_weights([9000, 30000], [35, 0], [100, 0]).tolist() == [
        (9000 * 100) >> (35 - 14 - 16), 0]
    assert dcu.candidate_weights([0, 0], [0, 0], [1, 2]).tolist() == [0, 0]


def test_the_requested_count_rounds_half_up_and_stays_in_range():
    # 43/128 of 192 = 64.5: half up gives 65 (Python's round gave 64, half to even)
    assert dcu.requested_count(192, 43 / 128) == 65
    assert [dcu.requested_count(c, r) for c in (192, 64) for r in (0.5, 0.6, 0.75, 0.9, 1.0)] == [
        96, 115, 144, 173, 192, 32, 38, 48, 58, 64]
    assert dcu.requested_count(192, 1e-9) == 1
    with pytest.raises(ValueError, match=r"ratio = 1.5 is out of range: accepted \(0, 1\]"):
        dcu.requested_count(192, 1.5)
    # k = 0 and k > C are not a selection: the DCU rejects such a job (KEEP)
    for k in (0, 9):
        with pytest.raises(ValueError, match=f"requested count k = {k} is out of range: "
                                             r"accepted 1..8"):
            dcu.select(torch.zeros(1, 8), [1], [1], [1], k)


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


@pytest.mark.parametrize("change, message", [
    ({"rows": 5}, r"candidate count n = 5 is out of range: accepted 1..4"),
    ({"rows": 0}, r"candidate count n = 0 is out of range: accepted 1..4"),
    ({"keep": 0}, r"requested count k = 0 is out of range: accepted 1..48"),
    ({"keep": 49}, r"requested count k = 49 is out of range: accepted 1..48"),
    ({"layer": 2}, r"layer = 2 is out of range: accepted 0..1"),
    ({"expert": 5}, r"expert = 5 is out of range: accepted 0..4"),
    ({"g": 65537}, r"routing weight g = 65537 is out of range: accepted 0..65536"),
    ({"prune": 2}, r"pruning mask bit = 2 is out of range: accepted 0..1"),
])
def test_the_encoder_names_the_bad_field_and_its_range(change, message):
    layout = WeightLayout(n_layers=2, n_experts=5, n_shared_experts=0, d_model=48, expert_ffn=40)
    n = change.get("rows", 2)
    job = DcuJob(3, change.get("layer", 1), change.get("expert", 4), Matrix.GATE_UP,
                 np.ones((n, 48), dtype=np.int64), np.full(n, 9000), np.full(n, 20),
                 np.full(n, change.get("g", 65536)), change.get("keep", 48),
                 np.full(48, change.get("prune", 1)))
    with pytest.raises(ValueError, match=message):
        encode_job(layout, job, max_group=4)
