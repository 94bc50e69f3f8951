"""The feeder's stages: from the EMA's notices and the descriptors' mask words to the engine's
column and scale streams, reading the location table and the weight buffer. lanes.py joins them
into the feeder: the `Replayer`, then one lane of stages 1-4 per matrix.

Five small components joined by streams, one item per cycle each:

0. `Replayer`: the descriptors and notices into the walker, a descriptor pair (an expert's
   GATE_UP and DOWN) as many times as engine groups use it (a prefill chunk's expert, fetched
   once, computed for more tokens than one group holds);
1. `MaskWalker`: per descriptor, its notice (the slot), its mask words, then the scale
   block's item and one item per selected channel, lowest first;
2. `Locator`: the location-table entry of each item (slot * chan_stride + channel, or the slot's
   scale entry): the buffer line where it starts;
3. `LineReader`: each item's buffer words (column_beats lines of a column, scale_beats of a
   scale block), one line per cycle, through the bank arbiter (lanes.py); as many words of 0
   for a `zero` item (what a bad descriptor did not fetch: `MaskWalker`);
4. `Router`: each word of the lane's matrix to the engine port of its kind.
"""

from __future__ import annotations

from amaranth.hdl import Array, Cat, Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from ...contracts.ema import MASK_BITS, EmaOp, ema_command_layout, ema_completion_layout
from ...contracts.top import OP_BITS, TopError, TopOp
from ...contracts.weight_layout import Matrix
from ..ema.geometry import EmaGeometry
from ..rejects import reject_signature
from ..streams import ReadSignature
from ..engine.layouts import column_layout, scale_words_layout
from .layouts import channel_layout, job_layout, line_layout, word_layout

__all__ = ["Replayer", "MaskWalker", "Locator", "LineReader", "Router",
           "line_read_signature"]


def _by_matrix(matrix, values: dict):
    """The value of `matrix` (a 1-bit signal) from {Matrix: constant}."""
    return Mux(matrix == Matrix.DOWN, values[Matrix.DOWN], values[Matrix.GATE_UP])


class Replayer(wiring.Component):
    """Passes the feeder's command words (`i_jobs`) and the EMA's notices (`i_issued`: a
    descriptor's slot, hw/ema `issued_signature`) on (`o_jobs`, `o_issued`), and replays
    descriptor pairs: a DESCRIPTOR word with `uses` = n >= 2 starts a pair, it and its mask
    words, then the next descriptor and its mask words (a GATE_UP and a DOWN of one expert:
    each engine group walks both), which the consumer sees n times in all, each time with the
    same two notices. The first time passes through and is recorded (2 + the two matrices'
    mask words, 10 words at the bundled model, and 2 notices); the replays come from the record
    and take nothing in. Nothing is fetched again: the notices' slots still hold the columns
    (the host does not start a new EMA step before the feeder has finished them).

    The consumer may take words ahead of their notices (the feeder's `MatrixSplit` does, up to
    `ahead` descriptors): the replayer counts the notices still owed for descriptors passed
    before a pair, passes those first, records the next two, and replays a pair's words and its
    two notices in full (both taken) before it passes or replays anything else. Relies on the
    pair being well formed (a descriptor where the second belongs: the PRU's and the host's
    are). `replay` is high while the consumer is served from the record; `again` pulses when a
    replay's first word is taken, before any of its items reach the engine (the top counts the
    descriptors the feeder owes it)."""

    def __init__(self, geometry: EmaGeometry, max_uses: int, ahead: int = 1):
        if max_uses < 1:
            raise ValueError(f"max_uses is {max_uses}: accepted 1 or more")
        if ahead < 1:
            raise ValueError(f"ahead is {ahead}: accepted 1 or more")
        self._g = geometry
        self._max_uses = max_uses
        self._ahead = ahead
        super().__init__({
            "i_jobs": In(stream.Signature(job_layout(max_uses))),
            "i_issued": In(stream.Signature(ema_completion_layout)),
            "o_jobs": Out(stream.Signature(ema_command_layout)),
            "o_issued": Out(stream.Signature(ema_completion_layout)),
            "replay": Out(1),
            "again": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        g = self._g
        most_words = max(g.mask_words(mat) for mat in Matrix)
        size = 2 + 2 * most_words           # two descriptors, each with up to most_words masks
        record = Array(Signal(ema_command_layout.size, name=f"record{i}") for i in range(size))
        notices = Array(Signal(ema_completion_layout.size, name=f"notice{i}")
                            for i in range(2))
        length = Signal(range(size + 1))        # words of the recorded pair
        ptr = Signal(range(size + 1))           # the next word recorded or replayed
        dptr = Signal(range(3))                 # the next notice recorded or replayed
        behind = Signal(range(self._ahead + 1))  # notices owed for descriptors passed before
        left = Signal.like(self.i_jobs.payload.uses)     # replays still owed
        descriptors = Signal(range(3))          # descriptors of the pair recorded so far
        words = Signal(range(most_words + 1))   # mask words still expected after a descriptor
        words_in = Signal()                     # the pair's words are all recorded

        cmd = self.i_jobs.payload.cmd
        is_desc = cmd.op == EmaOp.DESCRIPTOR
        cmd_words = _by_matrix(cmd.arg.descriptor.matrix,
                               {mat: g.mask_words(mat) for mat in Matrix})
        take = self.o_jobs.valid & self.o_jobs.ready
        take_notice = self.o_issued.valid & self.o_issued.ready

        def pass_notices(condition):
            m.d.comb += [self.o_issued.valid.eq(self.i_issued.valid & condition),
                         self.i_issued.ready.eq(self.o_issued.ready & condition),
                         self.o_issued.payload.eq(self.i_issued.payload)]

        def pass_words(condition):
            m.d.comb += [self.o_jobs.valid.eq(self.i_jobs.valid & condition),
                         self.i_jobs.ready.eq(self.o_jobs.ready & condition),
                         self.o_jobs.payload.eq(cmd)]

        with m.FSM(name="replay"):
            with m.State("Pass"):
                pass_words(1)
                pass_notices(1)
                m.d.sync += behind.eq(behind + (take & is_desc) - take_notice)
                with m.If(take & is_desc & (self.i_jobs.payload.uses >= 2)):
                    # the pair's own descriptor is not owed a notice before it
                    m.d.sync += [record[0].eq(cmd), ptr.eq(1), dptr.eq(0), descriptors.eq(1),
                                 words.eq(cmd_words), words_in.eq(0),
                                 behind.eq(behind - take_notice),
                                 left.eq(self.i_jobs.payload.uses - 1)]
                    m.next = "Record"
            with m.State("Record"):
                # the notices owed before the pair pass, the pair's two pass and are kept, the
                # next ones wait; the pair's words pass and are kept
                pass_words(~words_in)
                pass_notices(dptr < 2)
                with m.If(take_notice):
                    with m.If(behind != 0):
                        m.d.sync += behind.eq(behind - 1)
                    with m.Else():
                        m.d.sync += [notices[dptr].eq(self.i_issued.payload), dptr.eq(dptr + 1)]
                with m.If(take):
                    m.d.sync += [record[ptr].eq(cmd), ptr.eq(ptr + 1)]
                    with m.If(words == 0):      # the second descriptor
                        m.d.sync += [words.eq(cmd_words), descriptors.eq(2)]
                    with m.Else():
                        m.d.sync += words.eq(words - 1)
                        with m.If((words == 1) & (descriptors == 2)):
                            m.d.sync += [length.eq(ptr + 1), words_in.eq(1)]
                with m.If(words_in & (dptr == 2)):
                    m.d.sync += [ptr.eq(0), dptr.eq(0)]
                    m.next = "Replay"
            with m.State("Replay"):
                # a replay ends once its words and both notices are taken
                m.d.comb += [self.replay.eq(1),
                             self.o_jobs.valid.eq(ptr != length),
                             self.o_jobs.payload.eq(record[ptr]),
                             self.o_issued.valid.eq(dptr != 2),
                             self.o_issued.payload.eq(notices[dptr])]
                with m.If(take_notice):
                    m.d.sync += dptr.eq(dptr + 1)
                with m.If(take):
                    m.d.comb += self.again.eq(ptr == 0)
                    m.d.sync += ptr.eq(ptr + 1)
                with m.If((ptr == length) & (dptr == 2)):
                    m.d.sync += [ptr.eq(0), dptr.eq(0), left.eq(left - 1)]
                    with m.If(left == 1):
                        m.next = "Pass"
        return m


class MaskWalker(wiring.Component):
    """Takes a DESCRIPTOR word from `jobs`, then its slot from `issued` (the EMA's notice that
    the descriptor's location entries are written; its data may still be on the bus: the line
    reader waits for each line), then its mask words from `jobs` (ceil(in_channels / 32) of
    them, as the EMA's command contract says); emits the scale block's item, then each
    selected channel, lowest first, one per cycle. `last` marks the matrix's last column (and
    the scale item); `end` the descriptor's last item. A MASK word where a descriptor is
    expected is dropped (below). A notice that is not OK still walks (slot 0: the words fed are
    whatever the buffer holds; the top reports the descriptor's completion).

    Checks each descriptor's words (docs/contracts.md, "The top's commands: accepted ranges")
    so that the engine stays in step: a MASK word where a descriptor is expected is dropped
    (STRAY_MASK; the EMA fails it as BAD_COMMAND); mask bits past the matrix's last channel are
    not walked (MASK_TAIL; the EMA fails the descriptor as BAD_DESCRIPTOR); a descriptor
    without `scales` gets a `zero` scale item (NO_SCALES); one selecting no channel is walked
    as channel 0 alone, a `zero` item (NO_CHANNEL: the engine needs a column to end the
    matrix). `rejected` gives the first of them (op EMA) with the descriptor's last mask word,
    or with the stray word.

    Why `zero` items: the EMA writes location entries only for what a descriptor fetches (its
    scale block with `scales`, its selected channels; residency is per step), so the entry of
    a scale block or channel 0 the descriptor did not ask for may be stale, naming a line this
    step never fills, and a reader waiting for it would wait for good (issue 28, found by the
    top's fuzz bench). Every item the walker sends to the buffer is therefore one the
    descriptor fetched: its entry is written before the notice, and its lines come below the
    EMA's `filled` (or, after an EMA error, `filled` covers the buffer); the rest, which the
    engine needs only to end the matrix, is a `zero` item that the `LineReader` makes without
    a read. A rejected descriptor's outputs are not meaningful either way; zeros make them the
    same whatever the buffer holds.

    `awaiting` is high while a descriptor waits for its notice; `hungry` while the walker
    waits for a descriptor and none is queued.
    """

    def __init__(self, geometry: EmaGeometry):
        self._g = geometry
        g = geometry
        super().__init__({
            "jobs": In(stream.Signature(ema_command_layout)),
            "issued": In(stream.Signature(ema_completion_layout)),
            "channels": Out(stream.Signature(channel_layout(g.max_in_channels, g.slot_bits))),
            "awaiting": Out(1),
            "hungry": Out(1),
            "rejected": Out(reject_signature(TopError, OP_BITS)),
        })

    def elaborate(self, platform):
        m = Module()
        g = self._g
        n_words = max(g.mask_words(mat) for mat in Matrix)
        # the last mask word's channels: MASK_BITS, or what is left of the matrix's
        tails = {mat: (1 << (g.layout.in_channels(mat) - (g.mask_words(mat) - 1) * MASK_BITS)) - 1
                 for mat in Matrix}
        error = Signal(TopError)            # the descriptor's first bad field so far
        any_channel = Signal()              # a channel selected by its mask words so far
        no_scales = Signal()                # the descriptor has no scale block: a zero item
        empty = Signal()                    # it selects no channel: channel 0, a zero item
        m.d.comb += [self.rejected.payload.tag.eq(TopOp.EMA)]
        width = n_words * MASK_BITS
        words = [Signal(MASK_BITS, name=f"mask{k}") for k in range(n_words)]
        mask = Cat(*words)
        matrix = Signal()
        slot = Signal(g.slot_bits)
        k = Signal(range(n_words))
        out = self.channels.payload
        m.d.comb += [out.matrix.eq(matrix), out.slot.eq(slot)]

        # the lowest selected channel: its one-hot, encoded by an OR per index bit
        lowest = Signal(width)
        rest = Signal(width)
        m.d.comb += [lowest.eq(mask & (~mask + 1)), rest.eq(mask & ~lowest)]
        index = [Signal(name=f"index{b}") for b in range(max(1, (width - 1).bit_length()))]
        for b, bit in enumerate(index):
            m.d.comb += bit.eq(Cat(*(lowest[i] for i in range(width) if i >> b & 1)).any())
        last_word = _by_matrix(matrix, {mat: g.mask_words(mat) - 1 for mat in Matrix})

        with m.FSM(name="walk"):
            with m.State("Descriptor"):
                m.d.comb += [self.jobs.ready.eq(1), self.hungry.eq(~self.jobs.valid)]
                descriptor = self.jobs.payload.arg.descriptor
                with m.If(self.jobs.valid & (self.jobs.payload.op == EmaOp.DESCRIPTOR)):
                    m.d.sync += [matrix.eq(descriptor.matrix), k.eq(0), mask.eq(0),
                                 any_channel.eq(0), no_scales.eq(~descriptor.scales),
                                 empty.eq(0),
                                 error.eq(Mux(descriptor.scales, TopError.NONE,
                                              TopError.NO_SCALES))]
                    m.next = "Issued"
                with m.Elif(self.jobs.valid):
                    m.d.comb += [self.rejected.valid.eq(1),
                                 self.rejected.payload.code.eq(TopError.STRAY_MASK)]
            with m.State("Issued"):
                m.d.comb += [self.awaiting.eq(1), self.issued.ready.eq(1)]
                with m.If(self.issued.valid):
                    m.d.sync += slot.eq(self.issued.payload.slot)
                    m.next = "Mask"
            with m.State("Mask"):
                m.d.comb += self.jobs.ready.eq(1)
                given = self.jobs.payload.arg.mask
                valid_bits = Mux(k == last_word, _by_matrix(matrix, tails), (1 << MASK_BITS) - 1)
                kept = given & valid_bits
                code = Signal(TopError)             # the descriptor's first bad field
                m.d.comb += code.eq(error)
                with m.If(error == TopError.NONE):
                    with m.If((given & ~valid_bits).any()):
                        m.d.comb += code.eq(TopError.MASK_TAIL)
                    with m.Elif((k == last_word) & ~any_channel & ~kept.any()):
                        m.d.comb += code.eq(TopError.NO_CHANNEL)
                with m.If(self.jobs.valid):
                    for i, word in enumerate(words):
                        with m.If(k == i):
                            m.d.sync += word.eq(kept)
                    m.d.sync += [k.eq(k + 1), error.eq(code),
                                 any_channel.eq(any_channel | kept.any())]
                    with m.If(k == last_word):
                        m.d.comb += [self.rejected.valid.eq(code != TopError.NONE),
                                     self.rejected.payload.code.eq(code)]
                        with m.If(~any_channel & ~kept.any()):
                            m.d.sync += [words[0].eq(1), empty.eq(1)]   # channel 0 alone
                        m.next = "Scale"
            with m.State("Scale"):
                m.d.comb += [self.channels.valid.eq(1), out.scale.eq(1), out.last.eq(1),
                             out.end.eq(mask == 0), out.zero.eq(no_scales)]
                with m.If(self.channels.ready):
                    with m.If(mask == 0):
                        m.next = "Descriptor"
                    with m.Else():
                        m.next = "Walk"
            with m.State("Walk"):
                m.d.comb += [self.channels.valid.eq(1), out.channel.eq(Cat(*index)),
                             out.last.eq(rest == 0), out.end.eq(rest == 0), out.zero.eq(empty)]
                with m.If(self.channels.ready):
                    m.d.sync += mask.eq(rest)
                    with m.If(rest == 0):
                        m.next = "Descriptor"
        return m


class Locator(wiring.Component):
    """Each item's location-table entry: the buffer line its column (or scale block) starts at.
    The table's read port answers one cycle after the address; the output register holds the
    item while the next stage stalls, and the address stays on that item's entry meanwhile, so
    the line read with it stays valid. One item per cycle. A `zero` item's entry is read too
    and passed on unused (the reader does not read its lines)."""

    def __init__(self, geometry: EmaGeometry):
        self._g = g = geometry
        super().__init__({
            "channels": In(stream.Signature(channel_layout(g.max_in_channels, g.slot_bits))),
            "lines": Out(stream.Signature(line_layout(g.max_in_channels, g.line_bits))),
            "loc": Out(ReadSignature(g.loc_addr_bits, g.line_bits)),
        })

    def elaborate(self, platform):
        m = Module()
        g = self._g
        item = self.channels.payload
        full = Signal()
        held = Signal(self.loc.addr.shape())
        fields = ("matrix", "scale", "channel", "last", "end", "zero")
        regs = {f: Signal(len(getattr(item, f)), name=f"reg_{f}") for f in fields}
        take = Signal()
        entry = Mux(item.scale, g.scale_entry, item.channel)
        # chan_stride is a power of two: slot * chan_stride + entry is a concatenation
        address = Cat(entry[:(g.chan_stride - 1).bit_length()], item.slot)
        m.d.comb += [self.channels.ready.eq(~full | self.lines.ready),
                     take.eq(self.channels.valid & self.channels.ready),
                     self.loc.addr.eq(Mux(take, address, held)),
                     self.lines.valid.eq(full), self.lines.payload.line.eq(self.loc.data)]
        for f in fields:
            m.d.comb += getattr(self.lines.payload, f).eq(regs[f])
        with m.If(take):
            m.d.sync += [full.eq(1), held.eq(address)]
            m.d.sync += [regs[f].eq(getattr(item, f)) for f in fields]
        with m.Elif(self.lines.ready):
            m.d.sync += full.eq(0)
        return m


def line_read_signature(line_bits: int, data_width: int) -> wiring.Signature:
    """A weight-buffer read shared through `BankArbiter` (hw/top/lanes.py), seen from the
    reader: `request` the buffer line `line` (any bank); `grant` answers in the same cycle; the
    word comes on `data` the cycle after a granted request."""
    return wiring.Signature({"request": Out(1), "line": Out(line_bits), "grant": In(1),
                             "data": In(data_width)})


class LineReader(wiring.Component):
    """Each item's buffer words: a column's column_beats(matrix) lines, a scale block's
    scale_beats(matrix), from its first line on, one word per cycle. A line is requested only
    once it is below `filled` (the EMA's count of lines written this step), so a column flows
    on as its beats arrive, not after its whole descriptor; `waiting` is high while the next
    line is not written yet. The read port is shared with the other word stream's reader: a
    line is taken when its request is granted, and its word, which comes a cycle later, is
    kept in `held` if the engine does not take it then (the bank may serve the other reader
    next, so the address cannot be held instead). A `zero` item (MaskWalker: what its
    descriptor did not fetch) gives as many words of 0, one per cycle, with no request and no
    wait on `filled`."""

    def __init__(self, geometry: EmaGeometry):
        self._g = g = geometry
        super().__init__({
            "lines": In(stream.Signature(line_layout(g.max_in_channels, g.line_bits))),
            "filled": In(range(g.lines + 1)),
            "words": Out(stream.Signature(word_layout(g.max_in_channels, g.data_width))),
            "buf": Out(line_read_signature(g.line_bits, g.data_width)),
            "waiting": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        g = self._g
        item = self.lines.payload
        most = max(max(g.column_beats(mat), g.scale_beats(mat)) for mat in Matrix)
        i = Signal(range(most))
        count = Mux(item.scale, _by_matrix(item.matrix, {mat: g.scale_beats(mat) for mat in Matrix}),
                    _by_matrix(item.matrix, {mat: g.column_beats(mat) for mat in Matrix}))
        final = Signal()
        line = Signal(g.line_bits)
        m.d.comb += [final.eq(i == count - 1), line.eq(item.line + i)]
        full = Signal()             # a word is out (or on its way from the buffer)
        fresh = Signal()            # its word is on the read port this cycle
        held = Signal(g.data_width, reset_less=True)
        request, take = Signal(), Signal()
        fields = ("matrix", "scale", "channel")
        regs = {f: Signal(len(getattr(item, f)), name=f"reg_{f}") for f in fields}
        last, end = Signal(), Signal()
        written = item.zero | (line < self.filled)
        m.d.comb += [self.waiting.eq(self.lines.valid & ~written),
                     request.eq(self.lines.valid & written & (~full | self.words.ready)),
                     take.eq(request & (self.buf.grant | item.zero)),
                     self.buf.request.eq(request & ~item.zero), self.buf.line.eq(line),
                     self.lines.ready.eq(take & final),
                     self.words.valid.eq(full),
                     self.words.payload.data.eq(Mux(fresh, self.buf.data, held)),
                     self.words.payload.last.eq(last), self.words.payload.end.eq(end)]
        for f in fields:
            m.d.comb += getattr(self.words.payload, f).eq(regs[f])
        m.d.sync += fresh.eq(take & ~item.zero)
        # a word taken now replaces the one out, which the engine takes this cycle (a take
        # needs ~full | ready)
        with m.If(take & item.zero):
            m.d.sync += held.eq(0)
        with m.Elif(fresh):
            m.d.sync += held.eq(self.buf.data)
        with m.If(take):
            m.d.sync += [full.eq(1), i.eq(Mux(final, 0, i + 1)), last.eq(item.last & final),
                         end.eq(item.end & final)]
            m.d.sync += [regs[f].eq(getattr(item, f)) for f in fields]
        with m.Elif(self.words.ready):
            m.d.sync += full.eq(0)
        return m


class Router(wiring.Component):
    """One matrix's words to the engine's ports for it: its columns (`columns`, the channel
    field as wide as the matrix's `in_channels`) and its scale block (`scales`); `ended`
    pulses when a descriptor's last word is taken, `moved` with every word taken."""

    def __init__(self, geometry: EmaGeometry, in_channels: int):
        self._g = g = geometry
        w = g.data_width
        super().__init__({
            "words": In(stream.Signature(word_layout(g.max_in_channels, w))),
            "columns": Out(stream.Signature(column_layout(in_channels, w))),
            "scales": Out(stream.Signature(scale_words_layout(w))),
            "ended": Out(1),
            "moved": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        word = self.words.payload
        for port in (self.columns, self.scales):
            m.d.comb += [port.payload.data.eq(word.data), port.payload.last.eq(word.last)]
        m.d.comb += self.columns.payload.channel.eq(word.channel)
        with m.If(word.scale):
            m.d.comb += [self.scales.valid.eq(self.words.valid),
                         self.words.ready.eq(self.scales.ready)]
        with m.Else():
            m.d.comb += [self.columns.valid.eq(self.words.valid),
                         self.words.ready.eq(self.columns.ready)]
        moved = self.words.valid & self.words.ready
        m.d.comb += [self.moved.eq(moved), self.ended.eq(moved & word.end)]
        return m
