"""Host side of the EMA controller: the AXI burst split, command words, the reference model."""

import re
from pathlib import Path

import pytest
from amaranth.lib import data

from edgexpert.golden.blocks.ema import SCALE, EmaReference, split_bursts
from edgexpert.contracts.ema import (Completion, Descriptor, EmaError, EmaOp, EmaStatus,
                                    ema_command_layout, ema_completion_layout,
                                    ema_status_layout, encode_descriptor)
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


def test_reference_error_contract_first_failure_in_command_order_decides():
    ref = EmaReference(LAYOUT, 8, 8192, 4)
    step = [Descriptor(t, 0, t, Matrix.DOWN, [0, 2, 4]) for t in range(3)]
    # three reads of 3 beats (a 24-byte column) per descriptor, one burst each: bursts 3..5
    # belong to tag 1
    plain = ref.step(step)
    assert [len(split_bursts(r.address, r.beats, 8)) for r in plain.reads] == [1] * 9
    out = ref.step_with_errors(step, {(4, 2): EmaError.DECERR, (7, 0): EmaError.SLVERR})
    assert out.completions == [plain.completions[0], Completion(1, 0, EmaStatus.FAILED),
                               Completion(2, 0, EmaStatus.ABORTED)]
    assert (out.code, out.tag) == (EmaError.DECERR, 1)
    assert out.bursts_issued_at_least == 5 and out.written_beats == 4 * 3 + 2
    # a bad descriptor (layer out of range) after the one whose beat failed changes nothing;
    # before it, it is the failure and the later error beats are never fetched
    bad = Descriptor(9, LAYOUT.n_layers, 0, Matrix.DOWN, [1])
    late = ref.step_with_errors(step[:2] + [bad] + step[2:], {(4, 2): EmaError.DECERR})
    assert [c.status for c in late.completions] == [EmaStatus.OK, EmaStatus.FAILED,
                                                    EmaStatus.ABORTED, EmaStatus.ABORTED]
    early = ref.step_with_errors(step[:1] + [bad] + step[1:], {(4, 2): EmaError.DECERR})
    assert [c.status for c in early.completions] == [EmaStatus.OK, EmaStatus.FAILED,
                                                     EmaStatus.ABORTED, EmaStatus.ABORTED]
    assert (early.code, early.tag) == (EmaError.BAD_DESCRIPTOR, 9)
    assert early.written_beats == 9 and early.bursts_issued_at_least == len(early.bursts) == 3
    clean = ref.step_with_errors(step, {})
    assert clean.completions == plain.completions and clean.code == EmaError.NONE
    with pytest.raises(ValueError, match="unique tags"):
        ref.step_with_errors(step + step[:1], {})


def _field_bits(layout, prefix: str = "", base: int = 0) -> dict[str, tuple[int, int]]:
    """(high, low) bit of every leaf field of an Amaranth layout, by dotted name."""
    out = {}
    for name, field in layout:
        if isinstance(field.shape, data.Layout):
            out.update(_field_bits(field.shape, f"{prefix}{name}.", base + field.offset))
        else:
            out[prefix + name] = (base + field.offset + field.width - 1, base + field.offset)
    return out


def test_doc_bit_offsets_match_the_layouts():
    doc = (Path(__file__).parents[1] / "docs" / "blocks" / "ema.md").read_text()
    table = doc.split("### Bit offsets", 1)[1].split("\n\n| word |", 1)[1].split("\n\n", 1)[0]
    documented = {}
    for word, field, bits in re.findall(r"^\| (\w+) \| `([\w.]+)`[^|]* \| ([\d:]+) \|$", table,
                                        re.M):
        high, _, low = bits.partition(":")
        documented[word, field] = (int(high), int(low or high))
    expected = {}
    for word, layout in (("command", ema_command_layout), ("completion", ema_completion_layout),
                         ("STATUS", ema_status_layout)):
        for field, bits in _field_bits(layout).items():
            expected[word, field] = bits
    assert documented == expected
