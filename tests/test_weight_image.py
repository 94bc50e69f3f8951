"""Packing expert weights into the external-memory image, per the layout contract."""

import numpy as np
import pytest

from edgexpert.contracts.weight_image import (column_values, memory_image, pack_int4, random_weights,
                                    scale_values, unpack_int4)
from edgexpert.contracts.weight_layout import Matrix, WeightLayout

LAYOUT = WeightLayout(n_layers=2, n_experts=2, d_model=16, expert_ffn=12, n_shared_experts=1,
                      base_address=0x40)


def test_int4_packing_low_nibble_first():
    assert pack_int4([1, 2, -1, -8]) == bytes([0x21, 0x8F])
    assert pack_int4([7]) == bytes([0x07])
    values = np.arange(-8, 8, dtype=np.int8)
    assert (unpack_int4(pack_int4(values), 16) == values).all()
    with pytest.raises(ValueError, match="int4 values must lie in -8..7"):
        pack_int4([8])


def test_image_places_columns_and_scales_where_the_layout_says():
    weights = random_weights(LAYOUT, seed=1)
    image = memory_image(LAYOUT, weights, junk_seed=2)
    base = LAYOUT.base_address
    assert len(image) == LAYOUT.total_bytes
    for layer, expert in [(0, 0), (1, 2)]:
        w = weights[layer, expert]
        at = LAYOUT.column_address(layer, expert, Matrix.GATE_UP, 5) - base
        col = unpack_int4(image[at:at + LAYOUT.column_bytes(Matrix.GATE_UP)], 24)
        assert (col[:12] == w.gate[:, 5]).all() and (col[12:] == w.up[:, 5]).all()
        at = LAYOUT.column_address(layer, expert, Matrix.DOWN, 11) - base
        assert (unpack_int4(image[at:at + 8], 16) == w.down[:, 11]).all()
        at = LAYOUT.block_address(layer, expert, Matrix.DOWN) - base
        scales = np.frombuffer(bytes(image[at:at + 32]), dtype="<u2")
        assert (scales == scale_values(weights, layer, expert, Matrix.DOWN)).all()
    assert (column_values(LAYOUT, weights, 1, 1, Matrix.DOWN, 3) == weights[1, 1].down[:, 3]).all()
    # padding after a 12-byte GATE_UP column is junk, not zeros, so reading it is noticed
    at = LAYOUT.column_address(0, 0, Matrix.GATE_UP, 0) - base + 12
    assert any(image[at:at + 20])
