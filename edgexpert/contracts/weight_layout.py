"""Where every expert weight lies in external memory: the EMA contract.

Pruning and depth coalescing act on *input* channels, so each matrix is stored input-channel-major:
the column W[:, j] of input channel j (all its output values, int4, packed) is one contiguous run.
A set of selected channels then becomes a few long bursts when neighbouring channels are selected
together. golden/ counts bytes with this module, hw/ generates the same addresses, sim/ costs
them; docs/weight-layout.md says the same in prose.

Per layer, per expert (routed experts 0..n_experts-1, then shared experts), two matrices:

- GATE_UP: input channels d_model; the column of channel j holds gate[0..F-1, j] then
  up[0..F-1, j] (F = expert_ffn), 2F int4 values = F bytes, so one burst brings both.
- DOWN: input channels F; the column of channel j holds down[0..D-1, j], D int4 = D/2 bytes.

A matrix block is its scale block, then its columns:
- scales: one 16-bit word per output channel (2F for GATE_UP, D for DOWN), little-endian; what
  the word means is fixed by the A8W4 integer path (docs/contracts.md);
- column j at `columns_base + j * column_stride`.
int4 packing: element 2i in the low nibble of byte i, element 2i+1 in the high nibble.
Every scale block and every column starts on an ALIGN-byte boundary (32 bytes: the widest AXI
data bus, 256 bits, so a column starts on a beat on every supported bus). The gap after a column
is padding, never read.

Blocks follow each other in the order (layer, expert, matrix), from `base_address`.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Iterable

__all__ = ["ALIGN", "Matrix", "Burst", "WeightLayout", "channel_runs"]

#: alignment of every scale block and column, bytes
ALIGN = 32


def _align(n: int) -> int:
    return -(-n // ALIGN) * ALIGN


class Matrix(enum.IntEnum):
    GATE_UP = 0
    DOWN = 1


@dataclass(frozen=True)
class Burst:
    """A contiguous read: `length` bytes from `address` (a run of neighbouring columns)."""
    address: int
    length: int


def channel_runs(channels: Iterable[int]) -> list[tuple[int, int]]:
    """Sorted distinct channels as (first, count) runs of consecutive channels."""
    runs: list[tuple[int, int]] = []
    for ch in sorted(set(channels)):
        if runs and runs[-1][0] + runs[-1][1] == ch:
            runs[-1] = (runs[-1][0], runs[-1][1] + 1)
        else:
            runs.append((ch, 1))
    return runs


@dataclass(frozen=True)
class WeightLayout:
    n_layers: int
    n_experts: int
    d_model: int
    expert_ffn: int
    n_shared_experts: int = 0
    base_address: int = 0

    def __post_init__(self):
        for name in ("n_layers", "n_experts", "d_model", "expert_ffn"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} = {value!r} is out of range: accepted integers >= 1")
        if self.d_model % 2:
            raise ValueError(f"d_model = {self.d_model} is odd: a DOWN column packs d_model int4 "
                             "values into whole bytes, accepted even values")
        if self.n_shared_experts < 0:
            raise ValueError(f"n_shared_experts = {self.n_shared_experts} is out of range: "
                             "accepted integers >= 0")
        if self.base_address < 0 or self.base_address % ALIGN:
            raise ValueError(f"base_address = {self.base_address:#x} is not accepted: accepted "
                             f"non-negative multiples of {ALIGN}")

    @classmethod
    def for_model(cls, model, base_address: int = 0) -> "WeightLayout":
        """The layout of a `config.ModelConfig`'s experts."""
        return cls(model.n_layers, model.n_experts, model.d_model, model.expert_ffn,
                   model.n_shared_experts, base_address)

    # --- shapes ----------------------------------------------------------------------------
    def in_channels(self, matrix: Matrix) -> int:
        return self.d_model if matrix == Matrix.GATE_UP else self.expert_ffn

    def out_channels(self, matrix: Matrix) -> int:
        return 2 * self.expert_ffn if matrix == Matrix.GATE_UP else self.d_model

    def group_macs(self, candidates: int, gate_up: int | None = None,
                   down: int | None = None) -> int:
        """Products of one engine group: each of `candidates` multiplies every fetched column,
        `gate_up` and `down` channels of each matrix (None: all), by its out_channels values."""
        gate_up = self.d_model if gate_up is None else gate_up
        down = self.expert_ffn if down is None else down
        return candidates * (gate_up * self.out_channels(Matrix.GATE_UP)
                             + down * self.out_channels(Matrix.DOWN))

    def column_bytes(self, matrix: Matrix) -> int:
        """Bytes that hold one column's values (what a fetch of the column moves)."""
        return -(-self.out_channels(matrix) // 2)

    def column_stride(self, matrix: Matrix) -> int:
        return _align(self.column_bytes(matrix))

    def scale_bytes(self, matrix: Matrix) -> int:
        return 2 * self.out_channels(matrix)

    def block_bytes(self, matrix: Matrix) -> int:
        return _align(self.scale_bytes(matrix)) + self.in_channels(matrix) * self.column_stride(matrix)

    @property
    def experts_per_layer(self) -> int:
        return self.n_experts + self.n_shared_experts

    @property
    def expert_bytes(self) -> int:
        return self.block_bytes(Matrix.GATE_UP) + self.block_bytes(Matrix.DOWN)

    @property
    def total_bytes(self) -> int:
        return self.n_layers * self.experts_per_layer * self.expert_bytes

    # --- addresses -------------------------------------------------------------------------
    def _check(self, layer: int, expert: int, matrix: Matrix, channel: int | None = None):
        if not 0 <= layer < self.n_layers:
            raise ValueError(f"layer {layer} is out of range: accepted 0..{self.n_layers - 1}")
        if not 0 <= expert < self.experts_per_layer:
            raise ValueError(f"expert {expert} is out of range: accepted "
                             f"0..{self.experts_per_layer - 1}")
        Matrix(matrix)
        if channel is not None and not 0 <= channel < self.in_channels(matrix):
            raise ValueError(f"channel {channel} of {Matrix(matrix).name} is out of range: "
                             f"accepted 0..{self.in_channels(matrix) - 1}")

    def block_address(self, layer: int, expert: int, matrix: Matrix) -> int:
        """Address of the matrix block (its scale block comes first)."""
        self._check(layer, expert, matrix)
        address = self.base_address + (layer * self.experts_per_layer + expert) * self.expert_bytes
        if matrix == Matrix.DOWN:
            address += self.block_bytes(Matrix.GATE_UP)
        return address

    def columns_address(self, layer: int, expert: int, matrix: Matrix) -> int:
        return self.block_address(layer, expert, matrix) + _align(self.scale_bytes(matrix))

    def column_address(self, layer: int, expert: int, matrix: Matrix, channel: int) -> int:
        self._check(layer, expert, matrix, channel)
        return self.columns_address(layer, expert, matrix) + channel * self.column_stride(matrix)

    def bursts(self, layer: int, expert: int, matrix: Matrix, channels: Iterable[int]) -> list[Burst]:
        """The contiguous reads that bring the given input channels' columns: one per run of
        neighbouring channels, padding between neighbours included, trailing padding not."""
        out = []
        stride, used = self.column_stride(matrix), self.column_bytes(matrix)
        for first, count in channel_runs(channels):
            self._check(layer, expert, matrix, first + count - 1)
            out.append(Burst(self.column_address(layer, expert, matrix, first),
                             (count - 1) * stride + used))
        return out

    def fetch_bytes(self, matrix: Matrix, channels: Iterable[int]) -> int:
        """Bytes that fetching the given input channels' columns of one matrix moves: its bursts
        and, when any column is fetched, its scale block (one burst of scale_bytes)."""
        runs = channel_runs(channels)
        if not runs:
            return 0
        stride, used = self.column_stride(matrix), self.column_bytes(matrix)
        last = self.in_channels(matrix) - 1
        if runs[0][0] < 0 or runs[-1][0] + runs[-1][1] - 1 > last:
            raise ValueError(f"channels of {Matrix(matrix).name} are out of range: accepted 0..{last}")
        return self.scale_bytes(matrix) + sum((count - 1) * stride + used for _, count in runs)

    @property
    def expert_fetch_bytes(self) -> int:
        """Bytes that fetching a whole expert (every column of both matrices) moves."""
        return sum(self.fetch_bytes(m, range(self.in_channels(m))) for m in Matrix)
