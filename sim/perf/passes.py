"""The pass model (issue 12 item 3): what one decoding step's forward passes fetch and compute,
and their time and energy on a `platform:` (docs/performance-model.md, "Pass model").

The contract (`Pass`, `StepPlan`) is what a policy's accounting fills: synthetic routing
(sim/perf/estimate.py) for the full-size models, golden/'s per-pass counts for the bundled model
(issue 11). A `StepPlan` is one decoding step (or one prefill chunk): its passes, each with how
many times it runs per step, and the tokens the step yields. Per generated token = per step /
`tokens_per_step`.

Costing (`PassCoster`):
- fetch time: bytes / (the DRAM's peak x its efficiency on a sample of the pass's read pattern,
  run through `sim.perf.dram.DramModel`), and never faster than the EMA's bus (bus bits / 8 x clock).
  The event-level DRAM model is run on a sample, not on the whole stream: a full-size pass moves
  hundreds of megabytes (tens of millions of device bursts), and a sample of one read pattern
  reaches its steady state (refresh included) within a few tREFI. The EMA cycle model is not run
  for the same reason; at EdgeXpert's point its bus (25.6 GB/s) is above the DRAM's peak
  (16 GB/s), and on the golden masks it keeps the DRAM at its own efficiency
  (docs/performance-model.md, "The golden masks on DRAM").
- compute time: MACs / (macs x clock x `platform.compute_utilization`) (`compute_cycles`;
  `calibrate_compute` checks it against the accelerator top's measured cycles).
- overlap (the EMA's double buffering): the weight buffer's two halves let tile i + 1 stream in
  while tile i is computed, so a pass takes max(fetch, compute) plus the part that cannot
  overlap, one tile's worth of the shorter: min(fetch, compute) / tiles, tiles = fetched bytes /
  (sram_bytes / 2).
- energy: DRAM (the sample's activate, read and I/O energy per byte x bytes; background and
  refresh power x time), SRAM (every fetched byte written once and read once, plus activations,
  x the cost table's per-bit energies), MACs (x the cost table's energy per MAC), control
  (`platform.control_power_w` x time). Costs come from the cost table (build/synth/costs.json) when it
  exists, else from the cited defaults below; `PassCoster.cost_sources` says which.
"""

from __future__ import annotations

import json
import math
import random
from dataclasses import dataclass, field
from functools import lru_cache

from ...contracts.config import DramConfig, PlatformConfig
from ...contracts.trace import PassKind
from ...support.tools import build_root
from ...contracts.weight_layout import Matrix, WeightLayout, channel_runs
from .dram import DramModel

__all__ = ["MAC_KINDS", "GOLDEN_KINDS", "Pass", "StepPlan", "PassCoster", "PassCost",
           "load_cost_table", "calibrate_dram_passes",
           "DEFAULT_COSTS", "compute_cycles",
           "calibrate_compute", "calibrate_prefill"]

#: what MACs are counted by: routed and shared experts, attention and router projections and
#: dense FFNs, attention scores and values, the output head, the draft head
MAC_KINDS = ("expert", "projection", "attention", "head", "draft_head")

#: bytes of activations one token moves through the SRAM per layer: the residual vector read
#: and written, the attention and FFN inputs and outputs, at int8 (8 vectors of d_model; our
#: count)
ACTIVATION_VECTORS_PER_LAYER = 8

#: cost-table keys and the cited values used when build/synth/costs.json is absent
DEFAULT_COSTS = {
    "mac_lane.energy_per_mac": (
        318e-15, "docs/synthesis.md: the 64-pair mac_lane at 28 nm, 1.0 V (318 fJ per MAC)"),
    "sram.read_energy_per_bit.512KiB": (
        0.236e-12, "docs/synthesis.md: CACTI 7, 512 KiB at 28 nm (0.236 pJ/bit read)"),
    "sram.write_energy_per_bit.512KiB": (
        0.252e-12, "docs/synthesis.md: CACTI 7, 512 KiB at 28 nm (0.252 pJ/bit write)"),
}

#: bytes of each read pattern the DRAM model is run on (a few tREFI of streaming at 16 GB/s)
DRAM_SAMPLE_BYTES = 256 << 10


@dataclass(frozen=True)
class Pass:
    """One forward pass. Bytes are fetched from DRAM in this pass; `resident_bytes` are the
    weights an explicit on-chip share keeps that the pass reads from SRAM (already left out of
    `nonexpert_bytes` and `draft_head_bytes`), `held_bytes` the ones it keeps without reading
    (a draft head during verification): both take SRAM from the streaming double buffer.
    `expert_read_bytes` is the mean contiguous read of its expert fetches (the pattern the DRAM
    sample is drawn with; whole experts: a whole matrix); `macs` by `MAC_KINDS`."""
    kind: str                      # "prefill", "plain", "draft", "verify"
    tokens: int                    # tokens processed
    expert_bytes: float
    nonexpert_bytes: float
    kv_read_bytes: float
    kv_write_bytes: float
    macs: dict
    draft_head_bytes: float = 0.0
    resident_bytes: float = 0.0
    held_bytes: float = 0.0
    expert_channel_ratio: float = 1.0   # share of each matrix's input channels fetched

    KINDS = ("prefill", "plain", "draft", "verify")

    def __post_init__(self):
        if self.kind not in self.KINDS:
            raise ValueError(f"pass kind {self.kind!r} is not known: accepted "
                             f"{', '.join(self.KINDS)}")
        unknown = set(self.macs) - set(MAC_KINDS)
        if unknown:
            raise ValueError(f"MAC kinds {sorted(unknown)} are not known: accepted "
                             f"{', '.join(MAC_KINDS)}")

    @property
    def fetch_bytes(self) -> float:
        return (self.expert_bytes + self.nonexpert_bytes + self.draft_head_bytes
                + self.kv_read_bytes + self.kv_write_bytes)

    @property
    def total_macs(self) -> float:
        return sum(self.macs.values())


@dataclass(frozen=True)
class StepPlan:
    """One step of a policy: passes with how often each runs per step (a float: a mean over
    steps), and the tokens the step yields (accepted + bonus; a prefill chunk: its prompt
    tokens)."""
    policy: str
    model: str
    routing: str                   # "synthetic" or "trace"
    tokens_per_step: float
    passes: tuple                  # ((Pass, runs per step), ...)
    notes: tuple = ()

    def per_token(self, attribute: str) -> float:
        return sum(getattr(p, attribute) * n for p, n in self.passes) / self.tokens_per_step

    @property
    def passes_per_token(self) -> float:
        return sum(n for _, n in self.passes) / self.tokens_per_step


@dataclass
class PassCost:
    time_s: float
    fetch_s: float
    compute_s: float
    energy_j: dict = field(default_factory=dict)


@lru_cache(maxsize=64)
def _dram_sample(dram_key: tuple, read_bytes: int, gap_bytes: int) -> tuple[float, float, float]:
    """Efficiency, dynamic energy per byte (activate, read, I/O) and background + refresh power
    of the DRAM on a stream of `read_bytes` reads each followed by `gap_bytes` not read."""
    dram_type, channels, rate, interleave = dram_key
    model = DramModel.from_config(DramConfig(dram_type, channels, rate, interleave))
    address, moved = 0, 0
    while moved < DRAM_SAMPLE_BYTES:
        model.access(0.0, address, read_bytes)
        moved += read_bytes
        address += read_bytes + gap_bytes
    result = model.result()
    e = result.energy_j
    dynamic = (e["activate_j"] + e["read_j"] + e["io_j"]) / result.bytes_requested
    static_w = (e["refresh_j"] + e["background_j"]) / result.time_s
    return result.efficiency, dynamic, static_w


def expert_read_pattern(layout: WeightLayout, ratio: float, seed: int = 20261129
                        ) -> tuple[int, int]:
    """Mean contiguous read and mean skipped gap (bytes) when `ratio` of each matrix's input
    channels are fetched, chosen at random (seeded): the runs the weight layout makes of them.
    Whole experts (ratio 1): one read per matrix."""
    if ratio >= 1.0:
        return layout.expert_fetch_bytes // 2, 0
    rng = random.Random(seed)
    reads, read_bytes, gap_bytes = 0, 0, 0
    for matrix in Matrix:
        n = layout.in_channels(matrix)
        chosen = rng.sample(range(n), max(1, round(ratio * n)))
        stride = layout.column_stride(matrix)
        runs = channel_runs(chosen)
        reads += len(runs)
        read_bytes += sum(count * stride for _, count in runs)
        gap_bytes += (n - len(chosen)) * stride
    return max(32, read_bytes // reads), gap_bytes // reads


def load_cost_table() -> dict:
    """build/synth/costs.json parsed, with its path as "origin" ({} when there is none: every
    cost then takes its cited default)."""
    path = build_root() / "synth" / "costs.json"
    if not path.is_file():
        return {}
    return {**json.loads(path.read_text()), "origin": str(path)}


def compute_cycles(macs: float, array_macs: int, utilization: float) -> float:
    """The compute model: cycles to run `macs` on an array of `array_macs` MAC units that keeps
    `utilization` of its peak busy (the pass's compute time is this over the clock)."""
    return macs / (array_macs * utilization)


def calibrate_compute(cycle_file: dict, utilization: float) -> dict:
    """The compute model against the accelerator top's measured cycles (a cycle file of
    `edgexpert bench top`, docs/blocks/top.md "Cycle file"), pass by pass: the model's compute
    cycles for the pass's MACs on the bench's array (its `peak_macs_per_cycle` lanes; the clock
    is the same on both sides, so it cancels) at `utilization`, against the measured busy cycles,
    memory wait and compute; the measured utilization (MACs / (busy cycles x peak)) per run and
    pass kind, and the model's cycles and error with it. Errors are model / measured - 1.
    Raises ValueError on a run or pass without busy cycles."""
    runs = {}
    for name, run in sorted(cycle_file["runs"].items()):
        peak, busy = run["peak_macs_per_cycle"], run["cycles"]
        if busy <= 0 or not run["passes"]:
            raise ValueError(f"run {name}: no busy cycles or no passes to calibrate on")
        measured_u = run["macs"] / (busy * peak)
        passes = []
        for p in run["passes"]:
            if p["busy"] <= 0:
                raise ValueError(f"run {name}, pass {p['pass']}: no busy cycles")
            model = compute_cycles(p["macs"], peak, utilization)
            fitted = compute_cycles(p["macs"], peak, measured_u)
            passes.append({
                **{k: p[k] for k in ("prompt", "pass", "kind", "tokens", "macs", "busy",
                                     "memory_wait", "compute")},
                "macs_per_cycle": round(p["macs"] / p["busy"], 3),
                "utilization": round(p["macs"] / (p["busy"] * peak), 4),
                "model_cycles": round(model), "model_error": round(model / p["busy"] - 1, 4),
                "measured_u_cycles": round(fitted),
                "measured_u_error": round(fitted / p["busy"] - 1, 4)})
        kinds = {}
        for kind in sorted({p["kind"] for p in passes}):
            ps = [p for p in passes if p["kind"] == kind]
            kind_busy = sum(p["busy"] for p in ps)
            kinds[kind] = {"passes": len(ps),
                           "utilization": round(sum(p["macs"] for p in ps)
                                                / (kind_busy * peak), 4),
                           "memory_wait_share": round(sum(p["memory_wait"] for p in ps)
                                                      / kind_busy, 4)}
        model = compute_cycles(run["macs"], peak, utilization)
        runs[name] = {
            "peak_macs_per_cycle": peak, "cycles": busy, "macs": run["macs"],
            "memory_wait": run["memory_wait"], "compute": run["compute"],
            "memory_wait_share": round(run["memory_wait"] / busy, 4),
            "macs_per_cycle": round(run["macs"] / busy, 3),
            "utilization": round(measured_u, 4),
            "model_cycles": round(model), "model_error": round(model / busy - 1, 4),
            "measured_u_max_abs_error": max(abs(p["measured_u_error"]) for p in passes),
            "by_kind": kinds, "passes": passes}
    return {"model_utilization": utilization, "runs": runs}


#: golden's decoding pass kinds, by the label JSON carries them with (a measured run's
#: "pass_kinds", a cycle file's passes), as the pass model names them (`Pass.KINDS`)
GOLDEN_KINDS = {PassKind.AR.label: "plain", PassKind.DRAFT.label: "draft",
                PassKind.VERIFY.label: "verify"}


def calibrate_dram_passes(cycle_file: dict, layout: WeightLayout, coalescing_ratio: float,
                          utilization: float) -> dict:
    """The pass model's time (`PassCoster.cost`: the fetch at the DRAM's efficiency on the
    pass's read pattern, the compute at `utilization`, double buffered) against the top's busy
    cycles on a DRAM memory (a cycle file of `edgexpert bench top --memory lpddr4x|lpddr5`), pass
    by pass, on the RTL's own platform: the bench memory's clock and DRAM, the engine's peak MACs
    per cycle, the EMA's bus and weight buffer as the SRAM. A pass's bytes are its EMA beats
    (weights and scale blocks), read as expert bytes with every channel (`naive_sd`) or the
    `coalescing_ratio` share (EdgeXpert's masks). The prefill chunk (the file's `prefill`
    entry, when it has one) is priced layer by layer the same way, a prefill pass of the chunk's
    tokens on whole experts (the PRU's fetch list), in `prefill` per pause mode. Errors are
    model / measured - 1; by kind, per run and per chunk the sums' ratio. Raises ValueError on a
    cycle file of the latency memory."""
    memory = cycle_file.get("memory", {"memory": "latency"})
    if memory["memory"] == "latency":
        raise ValueError("the cycle file is the latency memory's: accepted a cycle file of a "
                         "DRAM memory (`edgexpert bench top --memory lpddr4x`)")
    clock_hz = memory["clock_hz"]
    runs = {}
    for name, run in sorted(cycle_file["runs"].items()):
        coster = _rtl_coster(cycle_file, layout, run["peak_macs_per_cycle"], utilization)
        ratio = 1.0 if run["masks"] == "naive_sd" else coalescing_ratio
        passes = [{**{k: p[k] for k in ("prompt", "pass", "kind", "tokens", "beats", "macs",
                                         "busy", "memory_wait", "compute")},
                   **_priced(coster, clock_hz, GOLDEN_KINDS[p["kind"]], p, ratio)}
                  for p in run["passes"]]
        kinds = {}
        for kind in sorted({p["kind"] for p in passes}):
            kinds[kind] = {"passes": sum(p["kind"] == kind for p in passes),
                           **_summed([p for p in passes if p["kind"] == kind])}
        model = sum(p["model_cycles"] for p in passes)
        runs[name] = {"cycles": run["cycles"], "model_cycles": model,
                      "error": round(model / run["cycles"] - 1, 4),
                      "max_abs_pass_error": max(abs(p["error"]) for p in passes),
                      "by_kind": kinds, "passes": passes}
    out = {"memory": memory, "model_utilization": utilization, "runs": runs}
    if cycle_file.get("prefill") and runs:
        # the PRU's chunk runs on the decode runs' engine: their peak
        coster = _rtl_coster(cycle_file, layout, next(iter(cycle_file["runs"].values()))
                             ["peak_macs_per_cycle"], utilization)
        out["prefill"] = {}
        for mode, chunk in sorted(cycle_file["prefill"].items()):
            layers = [{"layer": e["layer"], "tokens": chunk["tokens"],
                       **{k: e[k] for k in ("beats", "macs", "busy", "memory_wait", "compute")},
                       **_priced(coster, clock_hz, "prefill", {**e, "tokens": chunk["tokens"]},
                                 1.0)}
                      for e in chunk["per_layer"]]
            out["prefill"][mode] = {
                "tokens": chunk["tokens"], "layers": len(layers), **_summed(layers),
                "utilization": round(sum(e["macs"] for e in layers)
                                     / (sum(e["busy"] for e in layers) * coster.platform.macs),
                                     4),
                "max_abs_layer_error": max(abs(e["error"]) for e in layers),
                "per_layer": layers}
    return out


def _rtl_coster(cycle_file: dict, layout: WeightLayout, peak_macs: int,
                utilization: float) -> PassCoster:
    """A `PassCoster` on the platform a DRAM cycle file's RTL ran on: its memory's clock and
    DRAM, the engine's `peak_macs` a cycle, the EMA's bus, outstanding reads and weight buffer
    (as the SRAM), compute at `utilization`; no cost table (only time is compared)."""
    ema, memory = cycle_file["hardware"]["ema"], cycle_file["memory"]
    platform = PlatformConfig(
        clock_hz=memory["clock_hz"], macs=peak_macs, mac_clusters=1,
        sram_bytes=ema["buffer_bytes"], sram_banks=ema["buffer_banks"],
        ema_bus_bits=ema["data_width"], ema_outstanding=ema["outstanding"],
        compute_utilization=utilization, dram=DramConfig(**memory["dram"]))
    return PassCoster(platform, layout, cost_table={})


def _priced(coster: PassCoster, clock_hz: float, kind: str, measured: dict,
            ratio: float) -> dict:
    """The model's cycles for a measured pass or chunk-layer (`beats` on the EMA's bus,
    `macs`, `tokens`) of pass `kind` with `ratio` of each matrix's channels: total, fetch and
    compute, and the error against its `busy` cycles."""
    bus_bytes = coster.platform.ema_bus_bits // 8
    cost = coster.cost(Pass(kind, measured["tokens"], measured["beats"] * bus_bytes, 0, 0, 0,
                            {"expert": measured["macs"]}, expert_channel_ratio=ratio))
    model = cost.time_s * clock_hz
    return {"model_cycles": round(model), "fetch_cycles": round(cost.fetch_s * clock_hz),
            "compute_cycles": round(cost.compute_s * clock_hz),
            "error": round(model / measured["busy"] - 1, 4)}


def _summed(entries: list[dict]) -> dict:
    """Busy and model cycles summed over passes or chunk-layers, the sums' error and the share
    of the busy cycles waiting on memory."""
    busy = sum(e["busy"] for e in entries)
    model = sum(e["model_cycles"] for e in entries)
    return {"busy": busy, "model_cycles": model, "error": round(model / busy - 1, 4),
            "memory_wait_share": round(sum(e["memory_wait"] for e in entries) / busy, 4)}


def calibrate_prefill(cycle_file: dict, model_experts: float, utilization: float) -> dict:
    """The performance model's prefill against the top with its PRU on one prefill chunk (the
    cycle file's `prefill` entry, docs/blocks/top.md "Cycle file"), per pause mode and per
    chunk-layer: the measured busy cycles, memory wait, compute and MACs per cycle; the model's
    compute cycles for the chunk-layer's MACs at `utilization` and at the measured utilization
    of the whole-expert decode run (`naive_sd/none`: the same engine on whole experts; None
    without that run), with their errors; the experts the PRU fetched per chunk-layer against
    `model_experts` (the model's, sim.perf.estimate.plan_prefill). The peak is the decode runs'
    (`peak_macs_per_cycle`: both arrays of the same engine). Errors are model / measured - 1.
    Raises ValueError without a `prefill` entry or decode run, or on a chunk-layer without
    busy cycles."""
    if not cycle_file.get("prefill"):
        raise ValueError("no prefill entry: rerun `edgexpert bench top`")
    if not cycle_file.get("runs"):
        raise ValueError("no decode runs to take the array's peak from")
    peak = next(iter(cycle_file["runs"].values()))["peak_macs_per_cycle"]
    whole = cycle_file["runs"].get("naive_sd/none")
    decode_u = whole["macs"] / (whole["cycles"] * peak) if whole else None
    modes = {}
    for mode, chunk in sorted(cycle_file["prefill"].items()):
        busy, macs = chunk["busy_per_layer"], chunk["macs_per_layer"]
        if busy <= 0:
            raise ValueError(f"prefill {mode}: no busy cycles")
        model = compute_cycles(macs, peak, utilization)
        fitted = None if decode_u is None else compute_cycles(macs, peak, decode_u)
        modes[mode] = {
            "tokens": chunk["tokens"], "layers": chunk["layers"], "busy_per_layer": busy,
            "memory_wait_share": round(chunk["memory_wait_per_layer"] / busy, 4),
            "macs_per_layer": macs, "macs_per_cycle": round(macs / busy, 3),
            "utilization": round(macs / (busy * peak), 4),
            "model_cycles": round(model), "model_error": round(model / busy - 1, 4),
            "decode_u_cycles": None if fitted is None else round(fitted),
            "decode_u_error": None if fitted is None else round(fitted / busy - 1, 4),
            "experts_per_layer": chunk["experts_per_layer"],
            "model_experts_per_layer": round(model_experts, 2),
            "experts_error": round(model_experts / chunk["experts_per_layer"] - 1, 4)}
    return {"model_utilization": utilization, "peak_macs_per_cycle": peak,
            "decode_utilization": None if decode_u is None else round(decode_u, 4),
            "modes": modes}


class PassCoster:
    """Time and energy of passes on a platform (`config.platform`), for one model's layout."""

    def __init__(self, platform: PlatformConfig, layout: WeightLayout, cost_table=None):
        self.platform = platform
        self.layout = layout
        d = platform.dram
        self._dram_key = (d.type, d.channels, d.data_rate_mtps, d.interleave_bytes)
        self.peak_bytes_per_s = d.peak_bytes_per_s
        #: the EMA's AXI read bus: one beat of ema_bus_bits per clock
        self.bus_bytes_per_s = platform.ema_bus_bits // 8 * platform.clock_hz
        self.costs, self.cost_sources = self._load_costs(cost_table)
        self.seq = _dram_sample(self._dram_key, 2048, 0)        # a row-sized sequential stream

    @staticmethod
    def _load_costs(table) -> tuple[dict, dict]:
        """The cost table's entries this model uses (`table`: its parsed JSON, or None for
        build/synth/costs.json when present), each with where it came from."""
        if table is None:
            table = load_cost_table()
        origin = table.get("origin", "the given cost table")
        entries = table.get("costs", {})
        values, sources = {}, {}
        for key, (default, citation) in DEFAULT_COSTS.items():
            if key in entries:
                values[key] = float(entries[key]["value"])
                sources[key] = f"{origin}: {entries[key]['source']}"
            else:
                values[key], sources[key] = default, f"cited default: {citation}"
        return values, sources

    def _expert_sample(self, ratio: float):
        read, gap = expert_read_pattern(self.layout, ratio)
        return _dram_sample(self._dram_key, min(read, DRAM_SAMPLE_BYTES), gap)

    def cost(self, p: Pass) -> PassCost:
        expert = self._expert_sample(p.expert_channel_ratio)
        other = p.fetch_bytes - p.expert_bytes
        dram_s = (p.expert_bytes / (self.peak_bytes_per_s * expert[0])
                  + other / (self.peak_bytes_per_s * self.seq[0]))
        fetch_s = max(dram_s, p.fetch_bytes / self.bus_bytes_per_s)
        compute_s = (compute_cycles(p.total_macs, self.platform.macs,
                                    self.platform.compute_utilization) / self.platform.clock_hz)
        # the resident share takes its SRAM from the double buffer's two halves
        half = (self.platform.sram_bytes - p.resident_bytes - p.held_bytes) / 2
        tiles = max(1, math.ceil(p.fetch_bytes / half))
        time_s = max(fetch_s, compute_s) + min(fetch_s, compute_s) / tiles
        activation_bytes = (p.tokens * self.layout.n_layers * self.layout.d_model
                            * ACTIVATION_VECTORS_PER_LAYER)
        weight_bytes = p.fetch_bytes - p.kv_write_bytes + p.resident_bytes
        c = self.costs
        sram_j = 8 * ((p.fetch_bytes + activation_bytes)
                      * c["sram.write_energy_per_bit.512KiB"]
                      + (weight_bytes + activation_bytes)
                      * c["sram.read_energy_per_bit.512KiB"])
        dram_j = (p.expert_bytes * expert[1] + other * self.seq[1]
                  + self.seq[2] * time_s)
        energy = {"dram": dram_j, "sram": sram_j,
                  "mac": p.total_macs * c["mac_lane.energy_per_mac"],
                  "control": self.platform.control_power_w * time_s}
        return PassCost(time_s, fetch_s, compute_s, energy)
