"""Jobs a DCU instance must reject, as beats, each with the first bad field the contract names
(docs/contracts.md, "DCU jobs: accepted ranges"; `DcuError`). Shared by the Amaranth-simulator
test (tests/test_dcu_sim.py) and the cocotb bench (bench.py).

Each job is a good one with one field set out of range (two in the `first_*` cases, which check
that the first bad field in beat order is named), built beat by beat with the contract's
unchecked packers; its beats are exactly what its header announces (a count of 0: no entries
and no data; a count above the instance's groups: that many entries and rows of data). The
expected code is the field the case breaks, stated here, never read back from the RTL.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

import numpy as np

from edgexpert.contracts.dcu import (COUNT_BITS, G_MAX, LANES, DcuError, data_beats,
                                     dcu_entry_layout, entry_beat, header_beat, prune_beat)
from edgexpert.contracts.weight_layout import Matrix, WeightLayout

__all__ = ["BadJob", "bad_jobs"]


@dataclass(frozen=True)
class BadJob:
    name: str
    tag: int
    code: DcuError
    route: list[int]
    data: list[int]


def bad_jobs(layout: WeightLayout, max_group: int, rng: random.Random,
             first_tag: int = 0) -> list[BadJob]:
    """One job per way a field can be out of range for a DCU of `layout`'s channels, layers and
    experts (per layer) and groups of up to `max_group`; tags from `first_tag` on. A PRUNE bit
    past the last channel needs a matrix whose channels are not a multiple of 32 (else there
    is no such bit: the beat's bits above 32 are RESERVED), so that case is left out when
    neither matrix has one."""
    jobs = []

    def make(name: str, code: DcuError, *, count=None, keep=None, layer=None, expert=None,
             matrix=None, prune_or=0, entry_or=0, g_bad=None, first_entry_or=0):
        tag = (first_tag + len(jobs)) % 256
        matrix = Matrix(rng.randrange(2)) if matrix is None else matrix
        c = layout.in_channels(matrix)
        words = -(-c // LANES)
        n = rng.randint(1, max_group) if count is None else count
        q = np.array([[rng.randint(-127, 127) for _ in range(c)] for _ in range(n)],
                     dtype=np.int64).reshape(n, c)
        route = [header_beat(tag, rng.randrange(layout.n_layers) if layer is None else layer,
                             rng.randrange(layout.experts_per_layer) if expert is None else expert,
                             matrix, n, rng.randint(1, c) if keep is None else keep,
                             scales=rng.random() < 0.5, new_step=rng.random() < 0.5)]
        for w in range(words):
            lanes = min(LANES, c - w * LANES)
            bits = rng.getrandbits(lanes)
            route.append(prune_beat(bits) | (prune_or if w == words - 1 else 0))
        for i in range(n):
            g = rng.randint(0, G_MAX) if g_bad is None or i != n - 1 else g_bad
            beat = entry_beat(rng.randint(8257, 16513), rng.randint(18, 26), g)
            route.append(beat | (entry_or if i == n - 1 else 0)
                         | (first_entry_or if i == 0 else 0))
        jobs.append(BadJob(name, tag, code, route, data_beats(q)))

    spare_entry = 1 << dcu_entry_layout.size       # the lowest bit above an entry's fields
    make("count_above", DcuError.COUNT, count=max_group + 1)
    make("count_zero", DcuError.COUNT, count=0)
    make("count_top", DcuError.COUNT, count=2**COUNT_BITS - 1)
    make("keep_zero", DcuError.KEEP, keep=0)
    make("keep_above", DcuError.KEEP, matrix=Matrix.DOWN,
         keep=layout.in_channels(Matrix.DOWN) + 1)
    make("layer", DcuError.LAYER, layer=layout.n_layers)
    make("expert", DcuError.EXPERT, expert=layout.experts_per_layer)
    partial = [mx for mx in Matrix if layout.in_channels(mx) % LANES]
    if partial:
        make("prune_past_last_channel", DcuError.PRUNE, matrix=partial[0],
             prune_or=1 << (layout.in_channels(partial[0]) % LANES))
    make("prune_reserved", DcuError.RESERVED, prune_or=1 << LANES)
    make("entry_reserved", DcuError.RESERVED, entry_or=spare_entry)
    make("weight_above_one", DcuError.WEIGHT, g_bad=G_MAX + 1)
    # two bad fields: the header's comes first; among entries the earlier one (within one
    # beat, its reserved bits before its weight)
    make("first_layer_then_count", DcuError.LAYER, layer=layout.n_layers, count=0)
    make("first_reserved_then_weight", DcuError.RESERVED, count=min(max_group, 3),
         first_entry_or=spare_entry, g_bad=G_MAX + 1)
    return jobs
