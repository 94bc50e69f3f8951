"""Host side of the EMA controller: the AXI burst split, command words, the reference model."""

import pytest

from edgexpert.golden.ema import SCALE, EmaReference, split_bursts
from edgexpert.contracts.ema import Descriptor, EmaOp, ema_command_layout, encode_descriptor
from edgexpert.contracts.weight_layout import Matrix, WeightLayout

LAYOUT = WeightLayout(n_layers=2, n_experts=3, d_model=48, expert_ffn=40)


@pytest.mark.parametrize("beat_bytes", [8, 16, 32])
def test_split_keeps_every_beat_and_obeys_4k_and_256(beat_bytes):
    for address in (0, 4096 - beat_bytes, 4096 - 5 * beat_bytes, 123 * beat_bytes):
        for beats in (1, 7, 255, 256, 257, 1000):
            bursts = split_bursts(address, beats, beat_bytes)
            assert sum(n for _, n in bursts) == beats
            at = address
            for a, n in bursts:
                assert a == at and 1 <= n <= 256
                assert a // 4096 == (a + n * beat_bytes - 1) // 4096
                at += n * beat_bytes
    assert split_bursts(4096 - 16, 4, 8) == [(4080, 2), (4096, 2)]
    assert split_bursts(0, 300, 8) == [(0, 256), (2048, 44)]


def test_command_words():
    d = Descriptor(7, 1, 2, Matrix.GATE_UP, [0, 31, 32, 47], scales=True)
    words = encode_descriptor(LAYOUT, d)
    assert len(words) == 1 + 2        # 48 channels: two mask words
    views = [ema_command_layout.from_bits(w) for w in words]
    assert views[0].op == EmaOp.DESCRIPTOR
    desc = views[0].arg.descriptor
    assert (desc.tag, desc.layer, desc.expert, desc.matrix, desc.scales) == (7, 1, 2, 0, 1)
    assert [v.op for v in views[1:]] == [EmaOp.MASK, EmaOp.MASK]
    assert [v.arg.mask for v in views[1:]] == [1 | 1 << 31, 1 | 1 << 15]


def test_reference_deduplicates_within_a_step_only():
    ref = EmaReference(LAYOUT, 8, 8192, 4)
    a = Descriptor(0, 0, 1, Matrix.DOWN, range(10, 20), scales=True)
    b = Descriptor(1, 0, 1, Matrix.DOWN, range(15, 25), scales=True)
    r = ref.step([a, b])
    assert [(x.first, x.count) for x in r.reads] == [(None, 1), (10, 10), (20, 5)]
    assert r.skipped_channels == 5 and r.fetched_channels == 15
    assert r.completions[0].slot == r.completions[1].slot == 0
    # buffer lines: the scale block first (48 words = 96 bytes = 12 beats), then the runs
    assert r.locations[0, SCALE] == 0
    assert r.locations[0, 10] == 12
    # a DOWN column is 48 int4 = 24 bytes, padded to a 32-byte stride: 4 beats of 8 bytes
    assert r.locations[0, 11] == r.locations[0, 10] + 4
    again = ref.step([b])
    assert again.skipped_channels == 0 and again.fetched_channels == 10
    with pytest.raises(ValueError, match="needs more than 4 slots"):
        ref.step([Descriptor(i, 0, i % 3, Matrix(i // 3), [0]) for i in range(5)])
    with pytest.raises(ValueError, match="buffer lines"):
        ref.step([Descriptor(i, i // 3, i % 3, Matrix.GATE_UP, range(48)) for i in range(4)])
