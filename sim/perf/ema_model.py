"""Cycle model of the EMA controller (hw/ema/, docs/blocks/ema.md), calibrated on its RTL bench.

The model runs a stream of steps (descriptors with channel masks) through the controller's four
stages as max-plus recurrences over *items* (a scale block, a run of columns, a descriptor's
marker) and *bursts*, not cycle by cycle: every time below is the cycle an event happens, and each
is the latest of the events it waits for. The rules are read off the RTL:

1. **Decoder** (one FSM, one state per cycle): per descriptor Idle (accept), Lookup, Address,
   Scales (emits the scale block when asked for and not yet resident), then per mask word Mask
   (accept the word), Resolve, and Runs: one cycle per run emitted, plus one cycle that ends the
   word unless that cycle also opened a run reaching bit 31 or merged a whole word into an open
   run (`_word_ops` is that state's rule, bit for bit); then Flush (emits a run left open),
   Marker. NEW_STEP costs one Idle cycle. An emit waits until the one-item register between
   decoder and emit stage is free.
2. **Emit stage**: hands the item on the cycle after it was emitted, when the work queue (depth 4)
   and, for a run or scale block, the location queue (depth 4) have room. The location writer
   writes one entry per cycle (a run's `count` entries) and takes its next item on its last one.
3. **AR issue**: the head register takes the next work item on the cycle the previous one is done
   and issues one AR per cycle (each read cut at 4 KB pages and 256 beats), while fewer than
   `outstanding` bursts are in flight and the in-flight queue (depth `outstanding` + 3, a buffered
   FIFO: an entry reaches its head two cycles after it is written) has room; a marker takes one
   cycle and one queue entry.
4. **R side**: the head entry of the in-flight queue: a burst takes one beat per cycle once its
   data arrive; a marker takes one cycle with `rready` low (its completion leaves).

The memory behind the AXI port is pluggable: `FixedLatencyMemory` is the RTL bench's
(cocotb_tests/axi_memory.py: every burst answered a fixed latency after its AR is accepted, then
one beat per cycle); `DramMemory` puts the DRAM model of `sim/perf/dram.py` behind the bus, for
estimates and for the RTL benches' DRAM memory (`bench ema|top --memory lpddr4x`, whose runs
`calibrate` takes too).

Busy cycles (the controller's BUSY_CYCLES counter, the denominator of the benchmark's utilization)
run from the cycle after the first descriptor is accepted to the cycle the last marker leaves the
in-flight queue; commands arrive back to back, so the engine never idles in between.

`calibrate(summary)` rebuilds the utilization benchmark's workloads from the summary that
`edgexpert bench ema` writes (cocotb_tests/ema/utilization.py builds the same three cases) and
returns, per run, the model's cycles against the RTL's.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Protocol

from ...contracts.config import DRAM_MAX_DATA_RATE_MTPS, DramConfig
from ...contracts.ema import MASK_BITS, Descriptor
from ...contracts.mask_trace import read_mask_trace
from ...contracts.weight_layout import Matrix, WeightLayout
from ...golden.blocks.ema import EmaReference, split_bursts
from .dram import DramModel

__all__ = ["WORK_QUEUE_DEPTH", "LOCATION_QUEUE_DEPTH", "BENCH_R_PIPELINE",
           "EmaParameters", "Memory", "FixedLatencyMemory", "DramMemory", "EmaRun",
           "simulate_ema", "bench_workload", "calibrate", "CALIBRATION_TOLERANCE", "fetch_on_dram",
           "BENCH_MEMORIES", "bench_memory"]

#: hw/ema/controller.py: the `work` queue (SMALL_QUEUE_DEPTH = 4) between the allocator and the AR issuer
WORK_QUEUE_DEPTH = 4
#: hw/ema/controller.py: the `locations` queue (SMALL_QUEUE_DEPTH = 4) in front of the location writer
LOCATION_QUEUE_DEPTH = 4
#: cycles from the controller loading an AR (`ar_load`) to the first R beat it can take, on top
#: of the bench memory's latency: arvalid is registered (+1, the memory time-stamps the AR on
#: that edge), the memory queues the beat on the edge `latency` later and cocotbext-axi's R
#: source drives it after the next edge (+1), where the controller samples it (+1)
#: (cocotb_tests/axi_memory.py, cocotbext.axi.stream.StreamSource)
BENCH_R_PIPELINE = 3
#: the calibration's tolerance on busy cycles, per run: issue 12 asks for the model within 10%
#: of the RTL on the same traces
CALIBRATION_TOLERANCE = 0.10


@dataclass(frozen=True)
class EmaParameters:
    """The controller's parameters that decide its timing (keys of
    `contracts.hardware.ema_parameters`)."""
    data_width: int = 256
    outstanding: int = 48
    buffer_bytes: int = 262144
    slots: int = 32

    @classmethod
    def from_hw(cls, hw: dict) -> "EmaParameters":
        return cls(hw["data_width"], hw["outstanding"], hw["buffer_bytes"], hw["slots"])

    @property
    def beat_bytes(self) -> int:
        return self.data_width // 8


class Memory(Protocol):
    """What the AXI slave does with one burst: given the cycle the controller loaded its AR,
    the earliest cycles of its first and last R beat (called in AR order)."""

    def burst(self, ar_cycle: int, address: int, beats: int, beat_bytes: int) -> tuple[int, int]:
        ...


@dataclass
class FixedLatencyMemory:
    """The RTL bench's memory (cocotb_tests/axi_memory.py): data `latency` cycles after the AR
    is accepted, one beat per cycle."""
    latency: int
    pipeline: int = BENCH_R_PIPELINE

    def burst(self, ar_cycle, address, beats, beat_bytes):
        first = ar_cycle + self.latency + self.pipeline
        return first, first + beats - 1


@dataclass
class DramMemory:
    """A DRAM behind the AXI port (sim/perf/dram.py): a burst reaches the DRAM model when its AR is on
    the bus (the cycle after it is loaded: arvalid is registered) and its beats can go once the
    DRAM has moved their bytes; `extra_latency_cycles` is the memory controller's and PHY's own
    pipeline, which the DRAM timing leaves out. The RTL benches' DRAM memory
    (cocotb_tests/axi_memory.py `DramAxiRam`) schedules its beats with `beat_cycles`."""
    dram: DramModel
    clock_hz: float
    extra_latency_cycles: int = 0

    @classmethod
    def from_params(cls, memory: dict, extra_latency_cycles: int = 0) -> "DramMemory":
        """The DRAM of a bench's memory parameters (`bench_memory`)."""
        return cls(DramModel.from_config(DramConfig(**memory["dram"])), memory["clock_hz"],
                   extra_latency_cycles)

    def _cycle(self, t_s: float) -> int:
        # the first clock edge at or after t (a nanosecond-scale tolerance for float rounding)
        return math.ceil(t_s * self.clock_hz - 1e-6)

    def beat_cycles(self, at_cycle: int, address: int, beats: int, beat_bytes: int) -> list[int]:
        """A burst whose AR is accepted at `at_cycle` (bursts in acceptance order): the earliest
        cycle of each beat, the first clock edge after the DRAM has moved the beat's bytes (plus
        `extra_latency_cycles`), and never two beats in one cycle."""
        arrivals = self.dram.arrivals(at_cycle / self.clock_hz, address, beats * beat_bytes,
                                      beat_bytes)
        out: list[int] = []
        for t_s in arrivals:
            cycle = self._cycle(t_s) + self.extra_latency_cycles
            out.append(cycle if not out else max(cycle, out[-1] + 1))
        return out

    def burst(self, ar_cycle, address, beats, beat_bytes):
        cycles = self.beat_cycles(ar_cycle + 1, address, beats, beat_bytes)
        return cycles[0], cycles[-1]


#: the RTL benches' memories (`edgexpert bench ema|top --memory`): cocotbext-axi's RAM at a
#: fixed latency (the default: cheap, and the calibration's reference), or the DRAM model's
#: timing for LPDDR4X or LPDDR5
BENCH_MEMORIES = ("latency", "lpddr4x", "lpddr5")


def bench_memory(name: str, platform) -> dict:
    """The parameters a bench's memory is built from: {"memory": name} and, for a DRAM, the
    accelerator's clock and the DRAM (`platform.clock_hz`, `platform.dram`, its type set to the
    one named: with another type configured, the named type's top speed bin on the same channels
    and interleave)."""
    if name not in BENCH_MEMORIES:
        raise ValueError(f"memory {name!r} is not known: accepted {', '.join(BENCH_MEMORIES)}")
    if name == "latency":
        return {"memory": name}
    dram_type = name.upper()
    dram = platform.dram
    if dram.type != dram_type:
        dram = DramConfig(dram_type, dram.channels, DRAM_MAX_DATA_RATE_MTPS[dram_type],
                          dram.interleave_bytes)
    return {"memory": name, "clock_hz": platform.clock_hz,
            "dram": {"type": dram.type, "channels": dram.channels,
                     "data_rate_mtps": dram.data_rate_mtps,
                     "interleave_bytes": dram.interleave_bytes}}


@dataclass
class EmaRun:
    """What the model predicts for a stream of steps."""
    busy_cycles: int = 0
    beats: int = 0
    bursts: int = 0
    descriptors: int = 0
    reads: int = 0
    decoder_cycles: int = 0

    @property
    def utilization(self) -> float:
        return self.beats / self.busy_cycles if self.busy_cycles else 0.0

    @property
    def mean_burst_beats(self) -> float:
        return self.beats / self.bursts if self.bursts else 0.0


# --- the decoder's Runs state ----------------------------------------------------------------
EMIT = "emit"
NOP = None


def _lowest_bit(w: int) -> int:
    return (w & -w).bit_length() - 1


def _first_zero_from(w: int, p: int) -> int:
    """First bit at or above p that is 0 in w (MASK_BITS when the run reaches the top)."""
    q = p
    while q < MASK_BITS and (w >> q) & 1:
        q += 1
    return q


def _word_ops(w: int, open_run: bool) -> tuple[list, bool]:
    """The Runs state on one mask word (hw/ema/decoder.py, state "Runs"): one entry per cycle, EMIT when
    the cycle emits a run; and whether a run is left open at the word's top."""
    ops: list = []
    start = True
    while True:
        if open_run and start and w & 1:          # the open run goes on from bit 0
            q = _first_zero_from(w, 0)
            if q == MASK_BITS:                    # it covers the whole word: still open
                ops.append(NOP)
                return ops, True
            ops.append(EMIT)
            w &= ~((1 << q) - 1)
            open_run, start = False, False
        elif open_run:                            # the open run ended at the word boundary
            ops.append(EMIT)
            open_run, start = False, False
        elif w == 0:
            ops.append(NOP)
            return ops, False
        else:
            p = _lowest_bit(w)
            q = _first_zero_from(w, p)
            if q == MASK_BITS:                    # the run reaches bit 31: left open
                ops.append(NOP)
                return ops, True
            ops.append(EMIT)
            w &= ~((1 << q) - 1)


def _decoder_ops(d: Descriptor, fetch: list[int], want_scale: bool, layout: WeightLayout) -> list:
    """Every decoder cycle of one descriptor, EMIT where an item leaves (scale, runs, marker)."""
    ops: list = [NOP, NOP, NOP]                   # Idle (accept), Lookup, Address
    ops.append(EMIT if want_scale else NOP)       # Scales
    words = -(-layout.in_channels(d.matrix) // MASK_BITS)
    bits = [0] * words
    for c in fetch:
        bits[c // MASK_BITS] |= 1 << (c % MASK_BITS)
    open_run = False
    for k in range(words):
        ops += [NOP, NOP]                         # Mask (accept the word), Resolve
        word, open_run = _word_ops(bits[k], open_run)
        ops += word
    ops.append(EMIT if open_run else NOP)         # Flush
    ops.append(EMIT)                              # Marker
    return ops


# --- the pipeline ----------------------------------------------------------------------------
class _Pipeline:
    """Stages 2-4 (emit stage, AR issue, R side) as recurrences over items in emit order. Each
    list holds, per item, entry or burst, the cycle of one event; queue capacities look back by
    the queue's depth."""

    def __init__(self, params: EmaParameters, memory: Memory, run: EmaRun):
        self.params, self.memory, self.run = params, memory, run
        self.outstanding = params.outstanding
        # SyncFIFOBuffered(depth=outstanding + 3): the output register and outstanding + 2 inside
        self.inflight_inner = params.outstanding + 2
        self.taken: list[int] = []        # per item: the emit stage hands it on
        self.read: list[int] = []         # per item: the AR issuer takes it from the work queue
        self.loc_read: list[int] = []     # per run or scale block: the location writer takes it
        self.loc_count: list[int] = []    # ... and writes this many entries
        self.moved: list[int] = []        # per in-flight entry: it leaves the inner queue
        self.burst_end: list[int] = []    # per burst: its last beat
        self.issuer_done = -1             # the issuer finished its current item
        self.last_write = -1              # the last in-flight queue write (an AR or a marker)
        self.r_done = -1                  # the R side finished its last entry

    def emit(self, kind: str, read, ready: int) -> int:
        """The decoder emits an item at `ready` or later; returns the cycle it does."""
        f = max(ready, self.taken[-1] if self.taken else ready)   # the item register is free
        g = f + 1
        if len(self.read) >= WORK_QUEUE_DEPTH:
            g = max(g, self.read[-WORK_QUEUE_DEPTH] + 1)
        if kind != "marker":
            if len(self.loc_read) >= LOCATION_QUEUE_DEPTH:
                g = max(g, self.loc_read[-LOCATION_QUEUE_DEPTH] + 1)
            taken_by_writer = g + 1
            if self.loc_read:
                taken_by_writer = max(taken_by_writer, self.loc_read[-1] + self.loc_count[-1])
            self.loc_read.append(taken_by_writer)
            self.loc_count.append(read.count)
        self.taken.append(g)
        r = max(g + 1, self.issuer_done)
        self.read.append(r)
        if kind == "marker":
            self.issuer_done = self._marker(r + 1)
        else:
            self.run.reads += 1
            u = r + 1
            for address, beats in split_bursts(read.address, read.beats, self.params.beat_bytes):
                u = self._burst(u, address, beats) + 1
            self.issuer_done = u - 1
        return f

    def _write_slot(self, u: int) -> int:
        """The first cycle from `u` at which the in-flight queue takes a write."""
        u = max(u, self.last_write + 1)
        e = len(self.moved)
        if e >= self.inflight_inner:
            u = max(u, self.moved[e - self.inflight_inner] + 1)
        return u

    def _burst(self, u: int, address: int, beats: int) -> int:
        b = len(self.burst_end)
        u = self._write_slot(u)
        if b >= self.outstanding:
            u = max(u, self.burst_end[b - self.outstanding] + 1)
        self.last_write = u
        first, last = self.memory.burst(u, address, beats, self.params.beat_bytes)
        head = max(u + 2, self.r_done + 1)
        self.moved.append(head - 1)
        begin = max(head, first, last - beats + 1)
        self.r_done = begin + beats - 1
        self.burst_end.append(self.r_done)
        self.run.beats += beats
        self.run.bursts += 1
        return u

    def _marker(self, u: int) -> int:
        u = self._write_slot(u)
        self.last_write = u
        head = max(u + 2, self.r_done + 1)
        self.moved.append(head - 1)
        self.r_done = head                # one cycle at the head, rready low
        return u


def simulate_ema(layout: WeightLayout, params: EmaParameters, steps: Iterable[Iterable[Descriptor]],
                 memory: Memory) -> EmaRun:
    """Busy cycles of the controller on `steps` (each sent as NEW_STEP + its descriptors, all
    back to back), with `memory` behind the AXI port."""
    ref = EmaReference(layout, params.beat_bytes, params.buffer_bytes, params.slots)
    run = EmaRun()
    pipe = _Pipeline(params, memory, run)
    t = 0                                 # the decoder's next cycle
    start = None                          # the first descriptor is accepted
    for step in steps:
        step = list(step)
        reads = iter(ref.step(step).reads)   # the reads, in the order the decoder emits them
        resident: dict = {}
        scales_in: set = set()
        t += 1                            # Idle: NEW_STEP
        for d in step:
            key = (d.layer, d.expert, d.matrix)
            have = resident.setdefault(key, set())
            fetch = sorted(d.channels - have)
            have |= d.channels
            want_scale = d.scales and key not in scales_in
            if want_scale:
                scales_in.add(key)
            ops = _decoder_ops(d, fetch, want_scale, layout)
            n_runs = sum(op is EMIT for op in ops) - 1 - want_scale
            items = [("scale", next(reads))] if want_scale else []
            items = iter(items + [("run", next(reads)) for _ in range(n_runs)]
                         + [("marker", None)])
            run.descriptors += 1
            if start is None:
                start = t
            for op in ops:
                t = (pipe.emit(*next(items), t) if op is EMIT else t) + 1
    start = start or 0
    run.decoder_cycles = t - start
    run.busy_cycles = max(0, pipe.r_done - start)
    return run


# --- the utilization benchmark's workloads and the calibration -------------------------------
def bench_workload(case: str, layout: WeightLayout, params: EmaParameters, trace_file: str | Path,
                   seed: int) -> list[list[Descriptor]]:
    """The steps of one case of the EMA utilization benchmark (cocotb_tests/ema/utilization.py):
    dense (whole experts with scales, as many per step as the buffer holds, at most 4, two
    steps), trace (the mask trace's steps, scales included) or random50 (the trace's steps with
    a seeded random half of each matrix's channels)."""
    if case == "dense":
        per_step = max(1, min(4, params.buffer_bytes // layout.expert_bytes))
        experts = [(layer, expert) for layer in range(layout.n_layers)
                   for expert in range(layout.experts_per_layer)][:2 * per_step]
        return [[Descriptor(0, layer, expert, matrix, range(layout.in_channels(matrix)), True)
                 for layer, expert in experts[s:s + per_step] for matrix in Matrix]
                for s in range(0, len(experts), per_step)]
    trace = read_mask_trace(trace_file, layout)
    if case == "trace":
        return [[Descriptor(0, e.layer, e.expert, e.matrix, e.channels, True) for e in step]
                for step in trace.steps]
    if case != "random50":
        raise ValueError(f"EMA benchmark case {case!r} is not known: accepted dense, trace, "
                         "random50")
    rng = random.Random(f"{seed}-random50")
    steps = []
    for step in trace.steps:
        masks: dict = {}
        for e in step:
            if (e.layer, e.expert, e.matrix) not in masks:
                masks[e.layer, e.expert, e.matrix] = [
                    c for c in range(layout.in_channels(e.matrix)) if rng.random() < 0.5]
        steps.append([Descriptor(0, e.layer, e.expert, e.matrix,
                                 masks[e.layer, e.expert, e.matrix], True) for e in step])
    return steps


def _bench_memory(summary: dict, run: dict) -> Memory:
    """The cycle model's memory for a run of the benchmark: the latency memory's, or a fresh
    DRAM (each run is a test of its own, with its own DRAM memory) whose beats reach the
    controller BENCH_R_PIPELINE - 1 cycles after the DRAM has moved them (the AR's register
    cycle is the DRAM's arrival time already)."""
    memory = summary.get("memory", {"memory": "latency"})
    if memory["memory"] == "latency":
        return FixedLatencyMemory(run["latency"])
    return DramMemory.from_params(memory, extra_latency_cycles=BENCH_R_PIPELINE - 1)


def calibrate(summary: dict) -> dict:
    """Model against RTL on every run of an EMA utilization summary (what `edgexpert bench ema`
    writes to build/bench/ema/summary.json: `hardware`, `model`, `trace_file`, `seed`, `runs`;
    with `--memory lpddr4x` summary-lpddr4x.json, whose `memory` names the DRAM: the model then
    runs on `DramMemory` with the bench memory's R pipeline after the AR's acceptance).

    Returns {run name: {"rtl_cycles", "model_cycles", "error" (model / RTL - 1),
    "rtl_utilization", "model_utilization", "beats", "bursts"}} plus "max_abs_error". The
    workload is rebuilt here, so its beats and bursts are checked against the RTL's counters
    first: a mismatch means the workloads differ, and raises ValueError."""
    layout = WeightLayout(**summary["model"], base_address=summary.get("base_address", 0))
    params = EmaParameters.from_hw(summary["hardware"])
    out: dict = {}
    workloads: dict = {}
    for name, run in sorted(summary["runs"].items()):
        case = run["case"]
        if case not in workloads:
            workloads[case] = bench_workload(case, layout, params, summary["trace_file"],
                                             summary["seed"])
        model = simulate_ema(layout, params, workloads[case], _bench_memory(summary, run))
        if (model.beats, model.bursts) != (run["beats"], run["bursts"]):
            raise ValueError(f"{name}: the rebuilt workload has {model.beats} beats in "
                             f"{model.bursts} bursts, the RTL moved {run['beats']} in "
                             f"{run['bursts']}: not the benchmark's workload")
        rtl = run["busy_cycles"]
        out[name] = {"rtl_cycles": rtl, "model_cycles": model.busy_cycles,
                     "error": round(model.busy_cycles / rtl - 1, 5),
                     "rtl_utilization": run["utilization"],
                     "model_utilization": round(model.utilization, 4),
                     "beats": model.beats, "bursts": model.bursts}
    out_errors = [abs(v["error"]) for v in out.values()]
    return {"runs": out, "max_abs_error": max(out_errors) if out_errors else 0.0,
            "tolerance": CALIBRATION_TOLERANCE}


def fetch_on_dram(layout: WeightLayout, params: EmaParameters, steps: list[list[Descriptor]],
                  dram: DramConfig, clock_hz: float) -> dict:
    """The controller fetching `steps` from the DRAM of `dram` (platform.dram) at `clock_hz`:
    cycles, time, what the bursts look like, the DRAM's efficiency (requested bytes over the
    elapsed time, against its peak) and its energy by action."""
    model = DramModel.from_config(dram)
    run = simulate_ema(layout, params, steps, DramMemory(model, clock_hz))
    time_s = run.busy_cycles / clock_hz
    result = model.result(time_s)
    return {
        "cycles": run.busy_cycles, "time_s": time_s, "bytes": result.bytes_requested,
        "descriptors": run.descriptors, "reads": run.reads, "bursts": run.bursts,
        "bursts_per_descriptor": round(run.bursts / max(1, run.descriptors), 2),
        "mean_burst_bytes": round(run.beats * params.beat_bytes / max(1, run.bursts), 1),
        "dram_bursts": result.bursts, "activates": result.activates,
        "dram_efficiency": round(result.efficiency, 4),
        "peak_bytes_per_s": result.peak_bytes_per_s,
        "ema_utilization": round(run.utilization, 4),
        "energy_j": result.energy_j,
        "energy_pj_per_byte": round(result.total_energy_j / max(1, result.bytes_requested) * 1e12,
                                    2),
    }
