"""cocotb bench of the depth coalescing unit (bench.py), the golden depth groups it replays, and
the functions that run it."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import numpy as np

from edgexpert.support.tools import build_root
from edgexpert.hw.dcu import Dcu
from edgexpert.cocotb_tests.runner import SimResult, run_cocotb

__all__ = ["BENCH_MODULE", "BENCH_CASES", "BENCH_RATIO", "bench_tests", "golden_groups",
           "run_bench", "run_chain", "fetch_comparison"]

BENCH_MODULE = "edgexpert.cocotb_tests.dcu.bench"
CHAIN_MODULE = "edgexpert.cocotb_tests.dcu.chain"
#: the chained bench's EMA: the default bus, a smaller buffer and slot table (quick to build)
CHAIN_EMA = {"data_width": 256, "addr_width": 32, "outstanding": 16, "buffer_bytes": 65536,
             "buffer_banks": 4, "slots": 16}

#: the bundled model's channel counts (configs/default.yaml: d_model 192, expert_ffn 64), the
#: draft tree's max_candidates (64), its layers (4) and experts per layer (32, no shared one)
BENCH_CASES = {"bundled": {"gate_up_channels": 192, "down_channels": 64, "max_group": 64,
                           "layers": 4, "experts": 32}}

#: policies.coalescing_ratio of configs/default.yaml
BENCH_RATIO = 0.75
#: golden groups the quick bench replays on Icarus (taken evenly over the file, so layers and
#: depths stay mixed); Verilator replays them all
ICARUS_JOBS = 12
#: groups the benchmark also replays with random pauses (the timing run takes all of them)
FULL_PAUSED_JOBS = 400


def bench_tests() -> list[str]:
    """Names of the cocotb tests the bench runs (what its report holds)."""
    return sorted(["trace_groups/none", "trace_groups/random", "edge_cases/random",
                   "bad_jobs/random"])


def golden_groups(out: Path, prompts: int | None, new_tokens: int, every: bool) -> dict:
    """Write the depth groups of the golden model's integer-path speculative decoding of the
    bundled prompts (the first `prompts`, all when None; `new_tokens` each) to `out` (.npz),
    as the DCU takes them; returns what they cover.

    With `every`, every group of every verification pass; without, per (layer, depth, matrix)
    of the whole run its largest group: every layer and depth, few jobs.
    A file already written with the same arguments is reused."""
    key = f"{prompts}-{new_tokens}-{every}"
    if out.exists():
        with np.load(out) as f:
            if str(f["key"]) == key:
                return _coverage(f)
    from edgexpert.contracts.config import load_config
    from edgexpert.golden.lm.checkpoint import load_checkpoint
    from edgexpert.golden.lm.corpus import load_corpus
    from edgexpert.golden.decoding.decode import decode_speculative
    from edgexpert.golden.integer.int_model import quantize_model
    from edgexpert.golden.traces.masks import depth_groups
    from edgexpert.golden.lm.prompts import load_prompts
    from edgexpert.golden.traces.decode_trace import build_trace

    ckpt = load_checkpoint()
    token_lists = load_prompts(load_corpus(), ckpt.tokenizer)[:prompts]
    decode = load_config(overrides=[f"decode.max_new_tokens={new_tokens}"]).decode
    engine = quantize_model(ckpt.model)
    runs = [decode_speculative(engine, p, decode, keep_traces=True) for p in token_lists]
    trace = build_trace(runs, ckpt.model.cfg, decode, {})
    jobs = []          # (first of its step, group)
    for step in depth_groups(trace):
        jobs += [(i == 0, grp) for i, grp in enumerate(step)]
    if not every:
        largest: dict = {}
        for i, (_, grp) in enumerate(jobs):
            where = (grp.layer, grp.depth, grp.matrix)
            if where not in largest or len(grp.m) > len(jobs[largest[where]][1].m):
                largest[where] = i
        jobs = [(k == 0, jobs[i][1]) for k, i in enumerate(sorted(largest.values()))]
    counts = np.array([len(g.m) for _, g in jobs])
    width = max(g.q.shape[1] for _, g in jobs)
    q = np.zeros((counts.sum(), width), dtype=np.int8)
    at = 0
    for _, g in jobs:
        q[at:at + len(g.m), :g.q.shape[1]] = g.q
        at += len(g.m)
    out.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(
        out, key=key, q=q, counts=counts,
        meta=np.array([[g.layer, g.expert, int(g.matrix), g.depth, int(first)]
                       for first, g in jobs]),
        m=np.concatenate([g.m for _, g in jobs]), e=np.concatenate([g.e for _, g in jobs]),
        g=np.concatenate([g.g for _, g in jobs]))
    with np.load(out) as f:
        return _coverage(f)


def _coverage(f) -> dict:
    meta, counts = f["meta"], f["counts"]
    return {"jobs": int(len(counts)), "layers": sorted(set(meta[:, 0].tolist())),
            "depths": sorted(set(meta[:, 3].tolist())), "largest_group": int(counts.max())}


def run_bench(case: str, simulator: str = "verilator", seed: int = 20261201,
              waves: bool | None = None, full: bool = False) -> SimResult:
    """Run every test of the DCU bench for one parameter set; raises SimError on any failure.

    The trace tests replay golden depth groups: two bundled prompts and a few of each layer and
    depth (quick), or with `full` every group of all bundled prompts (the benchmark)."""
    hw = BENCH_CASES[case]
    name = "groups-all.npz" if full else "groups-ci.npz"
    groups = build_root() / "bench" / "dcu" / name
    coverage = golden_groups(groups, None if full else 2, 4, every=full)
    # Icarus runs this design at tens of cycles per second on a busy machine (Verilator at
    # thousands): on it the quick bench replays a share of the groups, every one on Verilator
    share = 0 if full or simulator != "icarus" else ICARUS_JOBS
    params = {**hw, "groups_file": str(groups), "ratio": BENCH_RATIO, "coverage": coverage,
              "trace_jobs": share or coverage["jobs"],
              "paused_jobs": min(share or 16, 16) if not full else FULL_PAUSED_JOBS}
    return run_cocotb(Dcu(**hw), toplevel="dcu", test_module=BENCH_MODULE,
                      case=f"{case}-full" if full else case, params=params,
                      simulator=simulator, seed=seed, waves=waves)


def fetch_comparison(groups_file: Path, job_cycles: list[int], layout, beat_bytes: int,
                     ratio: float = BENCH_RATIO) -> dict:
    """The DCU's cycles per job against the EMA's for the same job, by matrix and group size.

    The EMA's cycles are the beats its reads of the job's selected columns take on the bus
    (`WeightLayout.bursts`, each rounded up to whole beats; the scale block when the step first
    fetches the matrix): the bus moves at most one beat per cycle, so the EMA needs at least
    that many. `dedup`: only the channels not already fetched for the same matrix earlier in the
    step (what the EMA's residency skips), `all`: every selected channel."""
    from edgexpert.contracts.weight_layout import Matrix
    from edgexpert.golden.blocks import dcu

    def beats(nbytes: int) -> int:
        return -(-nbytes // beat_bytes)

    with np.load(groups_file) as f:
        q, counts, meta, m, e, g = (f[k] for k in ("q", "counts", "meta", "m", "e", "g"))
    rows = defaultdict(lambda: {"dcu": [], "ema_all": [], "ema_dedup": []})
    resident: dict = {}
    at = 0
    for (layer, expert, matrix, _depth, first), n, cycles in zip(meta.tolist(), counts.tolist(),
                                                                 job_cycles):
        matrix = Matrix(matrix)
        c = layout.in_channels(matrix)
        keep = dcu.requested_count(c, ratio)
        chosen = set(dcu.select(q[at:at + n, :c], m[at:at + n], e[at:at + n], g[at:at + n],
                                keep).tolist())
        at += n
        if first:
            resident = {}
        held = resident.setdefault((layer, expert, matrix), set())
        scale = 0 if held else beats(layout.scale_bytes(matrix))
        every = sum(beats(b.length) for b in layout.bursts(layer, expert, matrix, chosen))
        new = sum(beats(b.length) for b in layout.bursts(layer, expert, matrix, chosen - held))
        held |= chosen
        row = rows[(matrix.name, n)]
        row["dcu"].append(cycles)
        row["ema_all"].append(every + beats(layout.scale_bytes(matrix)))
        row["ema_dedup"].append(new + scale)
    out = {}
    for (name, n), row in sorted(rows.items()):
        mean = {k: sum(v) / len(v) for k, v in row.items()}
        out[f"{name}/{n}"] = {
            "jobs": len(row["dcu"]), "dcu_cycles_mean": mean["dcu"], "dcu_cycles_worst": max(row["dcu"]),
            "ema_beats_mean": mean["ema_all"], "ema_beats_dedup_mean": mean["ema_dedup"],
            "dcu_over_ema": mean["dcu"] / mean["ema_all"],
            # None: every channel was already fetched earlier in the step
            "dcu_over_ema_dedup": mean["dcu"] / mean["ema_dedup"] if mean["ema_dedup"] else None}
    totals = {k: sum(sum(row[k]) for row in rows.values()) for k in ("dcu", "ema_all", "ema_dedup")}
    return {"by_group": out, "total_dcu_cycles": totals["dcu"],
            "total_ema_beats": totals["ema_all"], "total_ema_beats_dedup": totals["ema_dedup"]}


def run_chain(simulator: str = "verilator", seed: int = 20261201, jobs: int = 24,
              latency: int = 40) -> SimResult:
    """The DCU -> EMA chained bench (chain.py) on the first `jobs` golden groups of the quick
    file, the bundled model's layout; raises SimError on any failure."""
    from dataclasses import asdict

    from edgexpert.contracts.config import load_config
    from edgexpert.contracts.weight_layout import WeightLayout
    from edgexpert.hw.dcu.chain import DcuEma

    hw = BENCH_CASES["bundled"]
    layout = WeightLayout.for_model(load_config().model)
    groups = build_root() / "bench" / "dcu" / "groups-ci.npz"
    golden_groups(groups, 2, 4, every=False)
    params = {**hw, "groups_file": str(groups), "ratio": BENCH_RATIO, "layout": asdict(layout),
              "ema": CHAIN_EMA, "jobs": jobs, "latency": latency}
    return run_cocotb(DcuEma(layout, hw, CHAIN_EMA), toplevel="dcu_ema",
                      test_module=CHAIN_MODULE, case="chain", params=params,
                      simulator=simulator, seed=seed)
