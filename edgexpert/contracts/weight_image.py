"""Expert weights as bytes in external memory, exactly as `WeightLayout` places them.

`memory_image` packs int4 matrices and 16-bit scale words into one byte image
(docs/weight-layout.md): per matrix block the scale block, then one column per input channel; GATE_UP column j holds
gate[0..F-1, j] then up[0..F-1, j], DOWN column j holds down[0..D-1, j]; int4 element 2i in the low
nibble of byte i. Padding bytes get a junk pattern, so a reader that returns padding where a
column was expected is caught. `column_values` / `scale_values` give what a column or scale block
must unpack to, straight from the matrices, for checking what a fetch brought on chip.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .weight_layout import Matrix, WeightLayout

__all__ = ["ExpertWeights", "pack_int4", "unpack_int4", "random_weights", "memory_image",
           "column_values", "scale_values"]


@dataclass(frozen=True)
class ExpertWeights:
    """One expert's int4 matrices ([out, in], values -8..7) and per-output-channel scale words."""
    gate: np.ndarray        # [F, D]
    up: np.ndarray          # [F, D]
    down: np.ndarray        # [D, F]
    scales_gate_up: np.ndarray  # [2F] uint16: gate rows, then up rows
    scales_down: np.ndarray     # [D] uint16


def pack_int4(values: np.ndarray) -> bytes:
    """int4 values (-8..7) to bytes: element 2i in the low nibble of byte i (odd count: the last
    high nibble is 0)."""
    v = np.asarray(values, dtype=np.int64).ravel()
    if v.size and (v.min() < -8 or v.max() > 7):
        raise ValueError(f"int4 values must lie in -8..7, not {int(v.min())}..{int(v.max())}")
    nib = (v & 0xF).astype(np.uint8)
    if nib.size % 2:
        nib = np.append(nib, np.uint8(0))
    return (nib[0::2] | (nib[1::2] << 4)).tobytes()


def unpack_int4(data: bytes, count: int) -> np.ndarray:
    """The first `count` int4 values packed in `data`."""
    raw = np.frombuffer(bytes(data), dtype=np.uint8)
    nib = np.empty(raw.size * 2, dtype=np.int8)
    nib[0::2] = raw & 0xF
    nib[1::2] = raw >> 4
    nib = nib[:count]
    return np.where(nib >= 8, nib - 16, nib).astype(np.int8)


def random_weights(layout: WeightLayout, seed: int) -> dict[tuple[int, int], ExpertWeights]:
    """Random int4 weights and scale words for every (layer, expert) of `layout`, seeded."""
    rng = np.random.default_rng(seed)
    d, f = layout.d_model, layout.expert_ffn
    out = {}
    for layer in range(layout.n_layers):
        for expert in range(layout.experts_per_layer):
            out[layer, expert] = ExpertWeights(
                gate=rng.integers(-8, 8, (f, d), dtype=np.int8),
                up=rng.integers(-8, 8, (f, d), dtype=np.int8),
                down=rng.integers(-8, 8, (d, f), dtype=np.int8),
                scales_gate_up=rng.integers(0, 2**16, 2 * f, dtype=np.uint16),
                scales_down=rng.integers(0, 2**16, d, dtype=np.uint16))
    return out


def column_values(layout: WeightLayout, weights: dict, layer: int, expert: int, matrix: Matrix,
                  channel: int) -> np.ndarray:
    """The int4 values of input channel `channel`'s column, in storage order."""
    layout.column_address(layer, expert, matrix, channel)  # range checks
    w = weights[layer, expert]
    if matrix == Matrix.GATE_UP:
        return np.concatenate([w.gate[:, channel], w.up[:, channel]])
    return w.down[:, channel]


def scale_values(weights: dict, layer: int, expert: int, matrix: Matrix) -> np.ndarray:
    w = weights[layer, expert]
    return w.scales_gate_up if matrix == Matrix.GATE_UP else w.scales_down


def memory_image(layout: WeightLayout, weights: dict, junk_seed: int = 0) -> bytearray:
    """The bytes from `layout.base_address` to the end of the weights; padding is junk."""
    rng = np.random.default_rng(junk_seed)
    image = bytearray(rng.integers(0, 256, layout.total_bytes, dtype=np.uint8).tobytes())
    base = layout.base_address
    for (layer, expert) in weights:
        for matrix in Matrix:
            start = layout.block_address(layer, expert, matrix) - base
            scales = scale_values(weights, layer, expert, matrix).astype("<u2").tobytes()
            image[start:start + len(scales)] = scales
            for ch in range(layout.in_channels(matrix)):
                at = layout.column_address(layer, expert, matrix, ch) - base
                col = pack_int4(column_values(layout, weights, layer, expert, matrix, ch))
                image[at:at + len(col)] = col
    return image
