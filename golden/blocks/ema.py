"""Reference model of the EMA controller, written from the contract without looking at the RTL.

`EmaReference` says what the controller must do with a step of well-formed descriptors:
de-duplication against what is resident in the step, one read per run of neighbouring channels at
the address `WeightLayout.bursts` gives (the scale block, when asked for, is one more read of its
padded block), bump allocation of buffer lines from line 0, the location of every column, and the
AXI bursts after the 4 KB / 256-beat split. Every number comes from `WeightLayout` and the bus
width (docs/blocks/ema.md); nothing is taken from `hw/`, so an arithmetic bug in the RTL's
constants cannot hide in the reference too. Benches and tests compare the RTL with it.

`EmaReference.step_with_errors` says what the controller must report when a step goes wrong:
error responses on some data beats, a descriptor with a field out of range, or both
(docs/blocks/ema.md, "Completions and errors").
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable

from ...contracts.ema import Completion, Descriptor, EmaError, EmaStatus
from ...contracts.weight_layout import Matrix, WeightLayout, channel_runs

__all__ = ["Read", "StepResult", "ErrorOutcome", "EmaReference", "split_bursts", "SCALE",
           "PAGE_BYTES", "MAX_BURST_BEATS"]

#: pseudo-channel naming a matrix's scale block in `StepResult.locations`
SCALE = "scale"
#: the 4 KB rule of AXI4 (AMBA AXI spec, A3.4.1): a burst may not cross a 4 KB boundary
PAGE_BYTES = 4096
#: longest AXI4 INCR burst (AMBA AXI spec, A3.4.1: AxLEN is 8 bits)
MAX_BURST_BEATS = 256


def split_bursts(address: int, beats: int, beat_bytes: int) -> list[tuple[int, int]]:
    """(address, beats) of the AXI INCR bursts of one read: none crosses a 4 KB boundary, none
    is longer than 256 beats."""
    out = []
    while beats:
        to_page = (PAGE_BYTES - address % PAGE_BYTES) // beat_bytes
        n = min(beats, to_page, MAX_BURST_BEATS)
        out.append((address, n))
        address += n * beat_bytes
        beats -= n
    return out


@dataclass(frozen=True)
class Read:
    """One contiguous read: a run of columns, or a scale block."""
    tag: int
    slot: int
    matrix: Matrix
    address: int
    beats: int
    line: int
    first: int | None     # first channel of the run; None for a scale block
    count: int


@dataclass
class StepResult:
    """What one step leaves behind."""
    reads: list[Read] = field(default_factory=list)
    completions: list[Completion] = field(default_factory=list)
    #: (slot, channel or SCALE) -> buffer line where the column (scale block) starts
    locations: dict = field(default_factory=dict)
    #: slot -> (layer, expert, matrix)
    slots: dict = field(default_factory=dict)
    #: slot -> resident channels
    resident: dict = field(default_factory=dict)
    fetched_channels: int = 0
    skipped_channels: int = 0
    lines_used: int = 0


@dataclass
class ErrorOutcome:
    """What a step with errors must leave behind (`EmaReference.step_with_errors`)."""
    #: one per descriptor, in command order
    completions: list[Completion]
    #: what STATUS must hold: the error and the tag of the one descriptor that completed FAILED
    code: EmaError
    tag: int
    #: the AR bursts (address, beats) the step would issue without errors; the ARs on the bus
    #: are a prefix of them
    bursts: list[tuple[int, int]]
    #: how many of `bursts` must have been issued (up to the failing one, or every burst of the
    #: descriptors before a bad one)
    bursts_issued_at_least: int
    #: the well-formed descriptors before the first bad one, as `step` fetches them
    result: StepResult
    #: beats, counted in read order over `result.reads`, that reach the buffer; every later
    #: line keeps what it held
    written_beats: int


class EmaReference:
    """The controller's behaviour on well-formed steps (errors are checked by the benches).

    `beat_bytes` is the AXI data bus width in bytes, `buffer_bytes` the weight buffer's size and
    `slots` how many distinct (layer, expert, matrix) one step may name.
    """

    def __init__(self, layout: WeightLayout, beat_bytes: int, buffer_bytes: int, slots: int):
        self.layout = layout
        self.beat_bytes = beat_bytes
        self.lines = buffer_bytes // beat_bytes
        self.slots = slots

    def _beats(self, nbytes: int) -> int:
        return -(-nbytes // self.beat_bytes)

    def scale_beats(self, matrix: Matrix) -> int:
        """A scale block is read whole with its padding: up to where the columns start."""
        layout = self.layout
        return self._beats(layout.columns_address(0, 0, matrix) - layout.block_address(0, 0, matrix))

    def stride_beats(self, matrix: Matrix) -> int:
        """Buffer lines between neighbouring columns of one read (the stride, padding included)."""
        return self._beats(self.layout.column_stride(matrix))

    def step(self, descriptors: Iterable[Descriptor]) -> StepResult:
        layout = self.layout
        out = StepResult()
        slot_of: dict = {}
        scales_in: set[int] = set()
        alloc = 0
        for d in descriptors:
            d.check(layout)
            key = (d.layer, d.expert, d.matrix)
            if key not in slot_of:
                if len(slot_of) == self.slots:
                    raise ValueError(f"step needs more than {self.slots} slots")
                slot_of[key] = len(slot_of)
                out.slots[slot_of[key]] = key
                out.resident[slot_of[key]] = set()
            slot = slot_of[key]
            resident = out.resident[slot]
            if d.scales and slot not in scales_in:
                scales_in.add(slot)
                beats = self.scale_beats(d.matrix)
                out.reads.append(Read(d.tag, slot, d.matrix,
                                      layout.block_address(d.layer, d.expert, d.matrix), beats,
                                      alloc, None, 1))
                out.locations[slot, SCALE] = alloc
                alloc += beats
            fetch = sorted(d.channels - resident)
            out.skipped_channels += len(d.channels & resident)
            out.fetched_channels += len(fetch)
            resident |= d.channels
            for (first, count), burst in zip(channel_runs(fetch),
                                             layout.bursts(d.layer, d.expert, d.matrix, fetch)):
                beats = self._beats(burst.length)
                for i in range(count):
                    out.locations[slot, first + i] = alloc + i * self.stride_beats(d.matrix)
                out.reads.append(Read(d.tag, slot, d.matrix, burst.address, beats, alloc,
                                      first, count))
                alloc += beats
            if alloc > self.lines:
                raise ValueError(f"step needs {alloc} buffer lines, the buffer has {self.lines}")
            out.completions.append(Completion(d.tag, slot, EmaStatus.OK))
        out.lines_used = alloc
        return out

    def step_with_errors(self, descriptors: Iterable[Descriptor],
                         error_beats: dict[tuple[int, int], EmaError]) -> ErrorOutcome:
        """A step where `error_beats[(burst, beat)]` (SLVERR or DECERR) answers that beat of
        that burst (bursts numbered in issue order, as `bursts` lists them) and descriptors whose
        fields are out of range fail their check (BAD_DESCRIPTOR).

        The contract: the first failure *in command order* decides. A descriptor fails when it
        is out of range or one of its own data beats returns an error (the first such beat in
        its reads' order gives the code). Every descriptor before it completes OK, it completes
        FAILED, every later one ABORTED, whatever happens to their data; FAILED and ABORTED
        completions carry slot 0. STATUS names the failing descriptor. Tags must be unique.
        """
        descriptors = list(descriptors)
        tags = [d.tag for d in descriptors]
        if len(set(tags)) != len(tags):
            raise ValueError("step_with_errors needs unique tags")
        good = []
        for d in descriptors:
            try:
                d.check(self.layout)
            except ValueError:
                break
            good.append(d)
        result = self.step(good)
        bursts, owner, beats_before = [], [], []
        done_beats = 0
        for r in result.reads:
            for burst in split_bursts(r.address, r.beats, self.beat_bytes):
                bursts.append(burst)
                owner.append(r.tag)
                beats_before.append(done_beats)
                done_beats += burst[1]
        failing, code, cut, issued = None, EmaError.NONE, done_beats, len(bursts)
        for i, d in enumerate(descriptors):
            if i == len(good):
                failing, code = i, EmaError.BAD_DESCRIPTOR
                break
            # (bursts past the planned ones belong to descriptors after a bad one: never issued)
            hits = sorted(key for key in error_beats
                          if key[0] < len(owner) and owner[key[0]] == d.tag)
            if hits:
                burst, beat = hits[0]
                failing, code = i, EmaError(error_beats[hits[0]])
                cut, issued = beats_before[burst] + beat, burst + 1
                break
        completions = []
        for i, d in enumerate(descriptors):
            if failing is None or i < failing:
                completions.append(result.completions[i])
            else:
                completions.append(Completion(d.tag, 0, EmaStatus.FAILED if i == failing
                                              else EmaStatus.ABORTED))
        return ErrorOutcome(completions, code, 0 if failing is None else descriptors[failing].tag,
                            bursts, issued, result, cut)

    def bursts(self, result: StepResult) -> list[tuple[int, int]]:
        """The AR bursts (address, beats) of a step, in issue order."""
        return [b for r in result.reads for b in split_bursts(r.address, r.beats,
                                                              self.beat_bytes)]

    def buffer_lines(self, result: StepResult, image: bytes, base_address: int = 0) -> dict:
        """line -> the bytes the buffer must hold there after the step, from the memory image."""
        B = self.beat_bytes
        out = {}
        for r in result.reads:
            for i in range(r.beats):
                at = r.address - base_address + i * B
                out[r.line + i] = bytes(image[at:at + B])
        return out
