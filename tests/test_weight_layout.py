"""The external-memory weight layout: sizes, addresses, bursts, and bad arguments."""

import pytest

from edgexpert.contracts.config import load_config
from edgexpert.contracts.weight_layout import ALIGN, Burst, Matrix, WeightLayout, channel_runs


@pytest.fixture
def layout():
    # F = 100: a GATE_UP column is 100 bytes, padded to a 128-byte stride
    return WeightLayout(n_layers=2, n_experts=4, d_model=64, expert_ffn=100, n_shared_experts=1)


def test_shapes(layout):
    assert layout.in_channels(Matrix.GATE_UP) == 64 and layout.out_channels(Matrix.GATE_UP) == 200
    assert layout.in_channels(Matrix.DOWN) == 100 and layout.out_channels(Matrix.DOWN) == 64
    assert layout.column_bytes(Matrix.GATE_UP) == 100 and layout.column_stride(Matrix.GATE_UP) == 128
    assert layout.column_bytes(Matrix.DOWN) == 32 and layout.column_stride(Matrix.DOWN) == 32
    assert layout.scale_bytes(Matrix.GATE_UP) == 400
    assert layout.block_bytes(Matrix.GATE_UP) == 416 + 64 * 128
    assert layout.block_bytes(Matrix.DOWN) == 128 + 100 * 32
    assert layout.total_bytes == 2 * 5 * layout.expert_bytes


def test_blocks_tile_memory_without_overlap(layout):
    spans = []
    for layer in range(2):
        for expert in range(5):
            for matrix in Matrix:
                start = layout.block_address(layer, expert, matrix)
                spans.append((start, start + layout.block_bytes(matrix)))
    spans.sort()
    assert spans[0][0] == 0 and spans[-1][1] == layout.total_bytes
    assert all(a_end == b_start for (_, a_end), (b_start, _) in zip(spans, spans[1:]))


def test_every_column_is_aligned_and_inside_its_block(layout):
    for matrix in Matrix:
        block = layout.block_address(1, 3, matrix)
        for ch in range(layout.in_channels(matrix)):
            address = layout.column_address(1, 3, matrix, ch)
            assert address % ALIGN == 0
            assert block < address
            assert address + layout.column_bytes(matrix) <= block + layout.block_bytes(matrix)


def test_runs_and_bursts(layout):
    assert channel_runs([5, 1, 2, 3, 9, 2]) == [(1, 3), (5, 1), (9, 1)]
    base = layout.columns_address(0, 2, Matrix.GATE_UP)
    assert layout.bursts(0, 2, Matrix.GATE_UP, [3, 4, 10]) == [
        Burst(base + 3 * 128, 128 + 100), Burst(base + 10 * 128, 100)]
    # runs {3, 4} and {10}: 128 + 100 and 100 bytes of columns, and the 400-byte scale block
    assert layout.fetch_bytes(Matrix.GATE_UP, [3, 4, 10]) == 228 + 100 + 400
    assert layout.fetch_bytes(Matrix.DOWN, []) == 0
    assert layout.expert_fetch_bytes == (400 + 63 * 128 + 100) + (128 + 99 * 32 + 32)
    with pytest.raises(ValueError, match="channels of DOWN are out of range: accepted 0..99"):
        layout.fetch_bytes(Matrix.DOWN, [100])


@pytest.mark.parametrize("call, message", [
    (lambda l: l.column_address(2, 0, Matrix.DOWN, 0), "layer 2 is out of range: accepted 0..1"),
    (lambda l: l.column_address(0, 5, Matrix.DOWN, 0), "expert 5 is out of range: accepted 0..4"),
    (lambda l: l.column_address(0, 0, Matrix.DOWN, 100), "channel 100 of DOWN is out of range: accepted 0..99"),
    (lambda l: l.bursts(0, 0, Matrix.GATE_UP, [63, 64]), "channel 64 of GATE_UP is out of range"),
    (lambda l: l.block_address(0, 0, 7), "7 is not a valid Matrix"),
])
def test_bad_arguments(layout, call, message):
    with pytest.raises(ValueError, match=message):
        call(layout)


def test_bad_shapes():
    with pytest.raises(ValueError, match="d_model = 63 is odd"):
        WeightLayout(1, 1, 63, 8)
    with pytest.raises(ValueError, match="base_address = 0x10 is not accepted"):
        WeightLayout(1, 1, 64, 8, base_address=16)
    with pytest.raises(ValueError, match="n_experts = 0 is out of range"):
        WeightLayout(1, 0, 64, 8)


def test_for_model():
    model = load_config().model
    layout = WeightLayout.for_model(model)
    assert layout.n_experts == model.n_experts and layout.expert_ffn == model.expert_ffn
