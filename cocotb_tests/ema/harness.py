"""The EMA test bench's pieces: DUT set-up, command and completion streams, the AXI memory and
monitor, register and memory read-back, and the checks after a step.

Used by bench.py (the tests) and utilization.py (the benchmark); both run inside the simulator.
"""

from __future__ import annotations

import logging
import random

import cocotb
from cocotb.triggers import ClockCycles, RisingEdge
from cocotbext.axi import AxiBus

from edgexpert.cocotb_tests.axi_memory import LatencyAxiRam, memory_for
from edgexpert.cocotb_tests.axi_monitor import AxiReadMonitor
from edgexpert.cocotb_tests.streams import BenchTB, pauses
from edgexpert.contracts.ema import Completion, Descriptor, encode_step
from edgexpert.golden.blocks.ema import SCALE, EmaReference, StepResult
from edgexpert.hw.ema import EmaGeometry
from edgexpert.contracts.ema import (MASK_BITS, SLOT_BITS, TAG_BITS, EmaCsr, EmaError, EmaStatus,
                                  ema_status_layout, mask_words)
from edgexpert.cocotb_tests.runner import bench_params
from edgexpert.contracts.weight_image import (column_values, memory_image, random_weights, scale_values,
                                    unpack_int4)
from edgexpert.contracts.weight_layout import Matrix, WeightLayout

__all__ = ["PERIOD_NS", "EmaTB", "EmaChainTB", "WriteRecorder", "decode_status", "pause_generator"]

PERIOD_NS = 10


def attach_ema_memory(dut, layout: WeightLayout, ema: dict, latency: int,
                      name: str) -> tuple[LatencyAxiRam, AxiReadMonitor]:
    """For a bench of a unit chained to `EmaSystem` (its ports at the top level, `ema` its
    parameters): the memories' read ports idle at address 0, and on `m_axi_` cocotbext-axi's
    memory with a pipelined `latency` holding random weights in `layout`'s image (cocotb's
    seed; junk between the blocks) under the AXI read protocol monitor."""
    for port in ["csr__addr", "loc_rd__0__addr", "res_rd__addr"] + \
            [f"buf_rd__{b}__addr" for b in range(ema["buffer_banks"])]:
        getattr(dut, port).value = 0
    image = memory_image(layout, random_weights(layout, seed=cocotb.RANDOM_SEED),
                         junk_seed=cocotb.RANDOM_SEED + 1)
    ram = LatencyAxiRam(AxiBus.from_prefix(dut, "m_axi_"), dut.clk, dut.rst,
                        size=2**len(dut.m_axi__araddr), latency=latency, period_ns=PERIOD_NS)
    # cocotbext-axi logs every reset of every channel at INFO
    logging.getLogger(f"cocotb.{name}.m_axi_").setLevel(logging.WARNING)
    ram.write(layout.base_address, bytes(image))
    monitor = AxiReadMonitor(dut, "m_axi", beat_bytes=ema["data_width"] // 8,
                             max_outstanding=ema["outstanding"])
    return ram, monitor


class EmaChainTB(BenchTB):
    """The TB of a unit chained to `EmaSystem` (the DCU's and the PRU's chain benches): the
    bench's parameters (`layout`, `ema`, `latency`), the EMA's AXI memory under the read protocol
    monitor, attached once after the reset (when the chains' measured runs have always attached
    it), the EMA's golden reference and its register reads. `memory_name`: the memory's logger."""

    def __init__(self, dut, memory_name: str):
        super().__init__(dut)
        self.params = bench_params()
        self.layout = WeightLayout(**self.params["layout"])
        self.beat = self.params["ema"]["data_width"] // 8
        self._memory_name = memory_name
        self.ram = self.monitor = None

    async def reset(self):
        await super().reset()
        self.ram, self.monitor = attach_ema_memory(self.dut, self.layout, self.params["ema"],
                                                   self.params["latency"], self._memory_name)

    def reference(self) -> EmaReference:
        ema = self.params["ema"]
        return EmaReference(self.layout, self.beat, ema["buffer_bytes"], ema["slots"])

    async def csr(self, reg: EmaCsr) -> int:
        self.dut.csr__addr.value = reg.value
        await RisingEdge(self.clk)
        await RisingEdge(self.clk)
        return self.dut.csr__data.value.to_unsigned()


def pause_generator(rng: random.Random, probability: float):
    """A pause generator for the AXI memory's channels: True (pause) on each cycle with
    `probability`, seeded."""
    while True:
        yield rng.random() < probability


def decode_status(value: int) -> dict:
    s = ema_status_layout.from_bits(value & ((1 << ema_status_layout.size) - 1))
    return {"busy": int(s.busy), "error": int(s.error), "code": EmaError(s.code),
            "tag": int(s.tag)}


class WriteRecorder:
    """Records every write `EmaSystem` shows on its observation ports `buf_wr` and `loc_wr`
    (address, data) in order, outside reset: what was written and when, including writes that
    leave a memory unchanged, which a read-back cannot see."""

    def __init__(self, dut):
        self._dut = dut
        self.buf: list[tuple[int, int]] = []
        self.loc: list[tuple[int, int]] = []
        self._task = cocotb.start_soon(self._run())

    async def _run(self):
        d = self._dut
        while True:
            await RisingEdge(d.clk)
            if bool(d.rst.value):
                continue
            if bool(d.buf_wr__en.value):
                self.buf.append((d.buf_wr__addr.value.to_unsigned(),
                                 d.buf_wr__data.value.to_unsigned()))
            if bool(d.loc_wr__en.value):
                self.loc.append((d.loc_wr__addr.value.to_unsigned(),
                                 d.loc_wr__data.value.to_unsigned()))


class EmaTB(BenchTB):
    """One test's bench: the clock, the AXI memory under the read protocol monitor, the `cmd`
    and `done` streams, the reference model and the read-back. Create it, then
    `await tb.reset()` (again for each reset); `pauses` is "none" or "random" (command valid,
    completion ready, AR ready and R valid, each paused at random).
    `record_writes` watches the buffer and location-table writes (`WriteRecorder`), and
    `run_step` then checks every one of them; the utilization benchmark leaves it off (a
    coroutine per cycle costs simulation time)."""

    def __init__(self, dut, name: str, *, latency: int, pauses: str = "none",
                 record_writes: bool = True):
        self.params = p = bench_params()
        self.name = name
        self.layout = WeightLayout(**p["layout"])
        self.g = EmaGeometry(self.layout, p["data_width"], p["buffer_bytes"], p["slots"])
        self.banks = p["buffer_banks"]
        self.outstanding = p["outstanding"]
        self.pauses = pauses
        self.rng = random.Random(f"{cocotb.RANDOM_SEED}-{name}")
        self.weights = random_weights(self.layout, seed=cocotb.RANDOM_SEED)
        self.image = memory_image(self.layout, self.weights, junk_seed=cocotb.RANDOM_SEED + 1)
        self.ref = EmaReference(self.layout, self.g.beat_bytes, p["buffer_bytes"], p["slots"])
        # the memory the bench's parameters name: at `latency`, or a DRAM (which ignores it)
        self.ram = memory_for(p, AxiBus.from_prefix(dut, "m_axi_"), dut.clk, dut.rst,
                              size=2**len(dut.m_axi__araddr), latency=latency,
                              period_ns=PERIOD_NS)
        # cocotbext-axi logs every reset of every channel at INFO
        logging.getLogger("cocotb.ema_system.m_axi_").setLevel(logging.WARNING)
        self.ram.write(self.layout.base_address, bytes(self.image))
        if pauses == "random":
            self.ram.ar_pause(pause_generator(self.rng, 0.3))
            self.ram.r_pause(pause_generator(self.rng, 0.3))
        dut._log.info("%s: seed %d, memory %s, latency %d, pauses %s, %d-bit bus, "
                      "%d outstanding", name, cocotb.RANDOM_SEED, self.ram.kind, latency, pauses,
                      self.g.data_width, self.outstanding)
        dut.csr__addr.value = 0
        dut.loc_rd__0__addr.value = 0
        dut.res_rd__addr.value = 0
        for b in range(self.banks):
            getattr(dut, f"buf_rd__{b}__addr").value = 0
        self.monitor = None
        self.writes = WriteRecorder(dut) if record_writes else None
        self.source = None
        self.sink = None
        # the clock last, behind the memory's and the recorder's coroutines, as it always
        # started: the scheduling order the measured cycles were taken with
        super().__init__(dut, period_ns=PERIOD_NS)

    def _attach(self):
        if self.monitor is None:
            self.monitor = AxiReadMonitor(self.dut, "m_axi", beat_bytes=self.g.beat_bytes,
                                          max_outstanding=self.outstanding)
        mode = "random" if self.pauses == "random" else "none"
        self.source = self.add_source("cmd", pauses(mode, self.rng), self.rng)
        self.sink = self.add_sink("done", pauses(mode, self.rng))

    async def reset(self, cycles: int = 3):
        """Hold the DUT's reset (the memory model resets with it), then fresh stream drivers
        (drawing from `rng`, which a test may replace between resets); on a reset while the
        bench runs, the old drivers stop first."""
        if self.sink is not None:
            self.sink.stop()
            self.source.idle()
        await super().reset(cycles)
        self._attach()

    # --- streams ---------------------------------------------------------------------------
    async def send(self, words: list[int]):
        for word in words:
            await self.source.send(word)

    def completions(self) -> list[Completion]:
        out = []
        for item in self.sink.items:
            tag = item & (2**TAG_BITS - 1)
            slot = (item >> TAG_BITS) & (2**SLOT_BITS - 1)
            out.append(Completion(tag, slot, EmaStatus(item >> (TAG_BITS + SLOT_BITS))))
        return out

    async def run_commands(self, words: list[int], n_completions: int,
                           max_cycles: int) -> list[Completion]:
        """Send `words` and wait for `n_completions` (failing on a hang); returns them."""
        self.sink.items.clear()
        sender = cocotb.start_soon(self.send(words))
        await self.sink.wait_for(n_completions, max_cycles)
        await sender
        await ClockCycles(self.dut.clk, 5)
        got = self.completions()
        assert len(got) == n_completions, f"{len(got)} completions for {n_completions} descriptors"
        return got

    def bound(self, result: StepResult, extra: int = 0) -> int:
        """A cycle bound for a step: beats, latency and pauses, times a generous margin."""
        beats = sum(r.beats for r in result.reads) + extra
        return 8 * (beats + 40 * (len(result.reads) + len(result.completions))) + \
            4 * self.ram.read_if.latency + 2000

    # --- read-back -------------------------------------------------------------------------
    async def _read(self, addr_port, data_port, addr: int) -> int:
        addr_port.value = addr
        await RisingEdge(self.dut.clk)
        await RisingEdge(self.dut.clk)
        return data_port.value.to_unsigned()

    async def csr(self, reg: EmaCsr) -> int:
        return await self._read(self.dut.csr__addr, self.dut.csr__data, reg.value)

    async def counters(self) -> dict[str, int]:
        return {reg.name: await self.csr(reg) for reg in EmaCsr}

    async def read_buffer(self) -> dict[int, bytes]:
        """Every line of the weight buffer (all banks read in parallel)."""
        B = self.g.beat_bytes
        ports = [(getattr(self.dut, f"buf_rd__{b}__addr"), getattr(self.dut, f"buf_rd__{b}__data"))
                 for b in range(self.banks)]
        out = {}
        for row in range(self.g.lines // self.banks):
            for addr, _ in ports:
                addr.value = row
            await RisingEdge(self.dut.clk)
            await RisingEdge(self.dut.clk)
            for b, (_, data) in enumerate(ports):
                out[row * self.banks + b] = data.value.to_unsigned().to_bytes(B, "little")
        return out

    async def read_location(self, slot: int, entry: int) -> int:
        return await self._read(self.dut.loc_rd__0__addr, self.dut.loc_rd__0__data,
                                slot * self.g.chan_stride + entry)

    async def read_residency(self, slot: int, word: int) -> int:
        return await self._read(self.dut.res_rd__addr, self.dut.res_rd__data,
                                slot * self.g.res_words_per_slot + word)

    # --- checks ----------------------------------------------------------------------------
    async def run_step(self, descriptors: list[Descriptor]) -> StepResult:
        """Run one step and check its completions; returns the reference's result."""
        result = self.ref.step(descriptors)
        buf_from, loc_from = (len(self.writes.buf), len(self.writes.loc)) if self.writes else (0, 0)
        got = await self.run_commands(encode_step(self.layout, descriptors),
                                      len(result.completions), self.bound(result))
        assert got == result.completions, f"completions {got} != expected {result.completions}"
        if self.writes:
            self.check_writes(result, self.writes.buf[buf_from:], self.writes.loc[loc_from:])
        return result

    def check_writes(self, result: StepResult, buf: list[tuple[int, int]],
                     loc: list[tuple[int, int]], beats: int | None = None):
        """The buffer writes of a step are its reads' lines in read order, each with its bytes
        of the memory image, each once (the first `beats` of them if the step stopped on an
        error); the location-table writes are exactly the reference's locations, each once."""
        lines = self.ref.buffer_lines(result, self.image, self.layout.base_address)
        order = [line for r in result.reads for line in range(r.line, r.line + r.beats)]
        order = order if beats is None else order[:beats]
        assert [a for a, _ in buf] == order, "buffer writes: lines differ from the reads' order"
        for line, value in buf:
            assert value.to_bytes(self.g.beat_bytes, "little") == lines[line], \
                f"buffer write to line {line}: wrong data"
        if beats is not None:
            return
        g = self.g
        want = {slot * g.chan_stride + (g.scale_entry if ch == SCALE else ch): line
                for (slot, ch), line in result.locations.items()}
        assert len(loc) == len(want) and dict(loc) == want, \
            f"location-table writes {sorted(loc)[:8]}... != {sorted(want.items())[:8]}..."

    async def check_buffer(self, expected: dict[int, bytes]) -> int:
        """Every line of the buffer equals `expected` (line -> bytes); returns lines checked."""
        lines = await self.read_buffer()
        for line in range(self.g.lines):
            assert lines[line] == expected[line], (
                f"buffer line {line}: {lines[line].hex()} != expected {expected[line].hex()}")
        return len(lines)

    async def check_step_contents(self, result: StepResult) -> int:
        """Each fetched column and scale block, found through the location table, unpacks to
        the weights it must hold; the residency words name exactly the fetched channels.
        Returns the bytes checked against the weights."""
        g, B = self.g, self.g.beat_bytes
        lines = await self.read_buffer()
        checked = 0
        for (slot, channel), line in sorted(result.locations.items(), key=str):
            layer, expert, matrix = result.slots[slot]
            entry = g.scale_entry if channel == SCALE else channel
            got_line = await self.read_location(slot, entry)
            assert got_line == line, (f"location of slot {slot} {channel}: line {got_line}, "
                                      f"expected {line}")
            if channel == SCALE:
                size = self.layout.scale_bytes(matrix)
                want = scale_values(self.weights, layer, expert, matrix)
            else:
                size = self.layout.column_bytes(matrix)
                want = column_values(self.layout, self.weights, layer, expert, matrix, channel)
            raw = b"".join(lines[got_line + i] for i in range(-(-size // B)))[:size]
            if channel == SCALE:
                got = [int.from_bytes(raw[2 * i:2 * i + 2], "little") for i in range(len(want))]
                assert got == [int(v) for v in want], f"scales of {result.slots[slot]}"
            else:
                got = unpack_int4(raw, len(want))
                assert (got == want).all(), (f"column {channel} of {result.slots[slot]} at line "
                                             f"{got_line}: {got.tolist()} != {want.tolist()}")
            checked += size
        for slot, channels in result.resident.items():
            for word, want in enumerate(mask_words(channels, g.res_words_per_slot * MASK_BITS)):
                got = await self.read_residency(slot, word)
                assert got == want, f"residency word {word} of slot {slot}: {got:#x} != {want:#x}"
        return checked

    def expected_lines(self, before: dict[int, bytes], result: StepResult) -> dict[int, bytes]:
        """The buffer after `result`'s step, from its content before."""
        out = dict(before)
        out.update(self.ref.buffer_lines(result, self.image, self.layout.base_address))
        return out

    def random_step(self, count: int, tag0: int = 0) -> list[Descriptor]:
        """Random descriptors (dense, runs, sparse, empty; repeats for de-duplication) that fit
        the buffer and the slot table."""
        rng, lay = self.rng, self.layout
        out: list[Descriptor] = []
        while len(out) < count:
            if out and rng.random() < 0.25:
                prev = rng.choice(out)
                key = (prev.layer, prev.expert, prev.matrix)
            else:
                key = (rng.randrange(lay.n_layers), rng.randrange(lay.experts_per_layer),
                       rng.choice(list(Matrix)))
            n = lay.in_channels(key[2])
            kind = rng.choice(["dense", "runs", "sparse", "sparse", "empty"])
            if kind == "dense":
                channels = range(n)
            elif kind == "empty":
                channels = []
            elif kind == "sparse":
                density = rng.choice([0.1, 0.3, 0.5, 0.8])
                channels = [c for c in range(n) if rng.random() < density]
            else:
                start = rng.randrange(n)
                channels = range(start, min(n, start + rng.randint(1, 48)))
            candidate = out + [Descriptor((tag0 + len(out)) % 256, *key, channels,
                                          scales=rng.random() < 0.5)]
            try:
                self.ref.step(candidate)
            except ValueError:      # over the buffer or the slot table: draw again
                continue
            out = candidate
        return out
