"""Good DCU jobs drawn at random (their expected commands are golden's: golden/blocks/dcu.py
`job_commands`). Shared by the Amaranth-simulator test (tests/test_dcu_sim.py) and the fuzz
bench (fuzz.py); bad_jobs.py makes the jobs to reject."""

from __future__ import annotations

import random

import numpy as np

from edgexpert.contracts.dcu import DcuJob
from edgexpert.contracts.weight_layout import Matrix, WeightLayout

__all__ = ["JOB_KINDS", "random_job"]

#: the kinds `random_job` draws: one candidate, the largest group, all-zero inputs, ties, a
#: pruning mask, every channel pruned, a candidate of negligible weight, and any
JOB_KINDS = ("one", "max", "zero", "ties", "prune", "pruned_all", "weighted", "random")


def random_job(rng: random.Random, layout: WeightLayout, max_group: int, tag: int,
               kind: str) -> DcuJob:
    """A good job of `kind` (JOB_KINDS) for a DCU of `layout` and groups of up to `max_group`
    ("max": that many candidates; "weighted" needs 2)."""
    matrix = rng.choice([Matrix.GATE_UP, Matrix.DOWN])
    c = layout.in_channels(matrix)
    n = {"one": 1, "max": max_group, "weighted": 2}.get(kind, rng.randint(1, max_group))
    q = np.array([[rng.randint(-127, 127) for _ in range(c)] for _ in range(n)])
    m = np.array([rng.randint(8257, 16513) for _ in range(n)])
    e = np.array([rng.randint(18, 26) for _ in range(n)])
    g = np.array([rng.randint(0, 65536) for _ in range(n)])
    prune = None
    if kind == "zero":
        q[:] = 0
        m[:], e[:] = 0, 0
    if kind == "ties":      # few distinct values: many equal keys
        q = np.array([[rng.choice([0, 3, 5]) for _ in range(c)] for _ in range(n)])
        m[:], e[:], g[:] = 9000, 20, 30000
    keep = rng.randint(1, c)
    if kind == "weighted":
        # issue 28: A (m 8257, e 20, g 1) and B (m 16000, e 36, g 65536), B's weighted scale
        # 1.9x A's; with E from the exponents alone both weights were 0 and the selection fell
        # back to channels 0..k-1, A's here
        keep = c // 4
        q[:] = 0
        q[0, :keep], q[1, c - keep:] = 127, 127
        m[:], e[:], g[:] = [8257, 16000], [20, 36], [1, 65536]
    if kind == "prune" or (kind != "weighted" and rng.random() < 0.3):
        prune = np.array([rng.random() < 0.7 for _ in range(c)], dtype=np.int64)
    if kind == "pruned_all":
        prune = np.zeros(c, dtype=np.int64)
    return DcuJob(tag, rng.randrange(layout.n_layers), rng.randrange(layout.n_experts), matrix,
                  q, m, e, g, keep, prune, scales=rng.random() < 0.5,
                  new_step=rng.random() < 0.3)
