"""The feeder as two word streams, one per matrix: the GATE_UP lane feeds the engine's GATE_UP
MAC while the DOWN lane feeds its DOWN MAC, so the next group's GATE_UP columns do not wait
behind this group's DOWN columns (which wait for its hidden vectors).

- `MatrixSplit`: the walker order (a descriptor, its notice, its mask words) split by matrix;
- `MatrixLane`: one matrix's queue, `MaskWalker`, `Locator`, `LineReader` and `Router`
  (feeder.py), with its own location-table read port;
- `BankArbiter`: the two lanes' line reads onto the weight buffer's banks, one read per bank
  and cycle;
- `Feeder`: the job and notice queues, the `Replayer` (with a PRU), the split, the two lanes and
  the arbiter, as one component of the top.
"""

from __future__ import annotations

from amaranth.hdl import Array, Const, Module, Mux, Signal, unsigned
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out, connect, flipped

from ...contracts.ema import EmaOp, ema_command_layout, ema_completion_layout
from ...contracts.top import OP_BITS, TopError
from ...contracts.weight_layout import Matrix
from ..ema.allocator import issued_signature
from ..ema.geometry import EmaGeometry
from ..engine.layouts import column_layout, scale_words_layout
from ..rejects import reject_signature
from ..streams import ReadSignature, StreamFIFO, bring_out
from .feeder import LineReader, Locator, MaskWalker, Replayer, Router, line_read_signature
from .layouts import job_layout

__all__ = ["MatrixSplit", "MatrixLane", "BankArbiter", "Feeder", "JOB_QUEUE_DEPTH",
           "ISSUED_QUEUE_DEPTH", "LANE_QUEUE_DEPTH"]

#: the feeder's copy of descriptors and mask words: a group's two descriptors with their mask
#: words are 2 + ceil(D/32) + ceil(F/32) beats (10 at the bundled model), so 32 let the host
#: send the next groups' fetches while the engine computes
JOB_QUEUE_DEPTH = 32
#: the EMA's notices (a descriptor's slot, its location entries written) not yet split: the EMA
#: pulses them without a ready, so the queue holds every descriptor handed to both and not yet
#: split: at most the job queue's (two words or more each), the replayer's two and the split's
ISSUED_QUEUE_DEPTH = JOB_QUEUE_DEPTH // 2 + 3
#: command words queued per lane: the DOWN lane holds the DOWN descriptors of the groups whose
#: GATE_UP columns run ahead (three words each at the bundled model: five groups, as many as the
#: engine holds, hw/engine/engine.py GROUP_QUEUE)
LANE_QUEUE_DEPTH = 16


def _lane_descriptors(depth: int) -> int:
    """Descriptors a lane holds before walking them: its queue's (two words or more each) and
    the walker's."""
    return depth // 2 + 1


class MatrixSplit(wiring.Component):
    """Splits the walker order into one per matrix: each DESCRIPTOR word and its mask words
    (`mask_words(matrix)` of them, as the walker counts) to `lane_jobs[matrix]`, each notice to
    the lane of its descriptor (notices come in descriptor order: a queue of the descriptors'
    matrices, `notices` deep, pairs them). A word where a descriptor is expected that is not one
    goes to the lane of the last descriptor, whose walker reports it (STRAY_MASK)."""

    def __init__(self, geometry: EmaGeometry, notices: int):
        self._g = geometry
        self._notices = notices
        super().__init__({
            "jobs": In(stream.Signature(ema_command_layout)),
            "issued": In(stream.Signature(ema_completion_layout)),
            "lane_jobs": Out(stream.Signature(ema_command_layout)).array(len(Matrix)),
            "lane_issued": Out(stream.Signature(ema_completion_layout)).array(len(Matrix)),
        })

    def elaborate(self, platform):
        m = Module()
        g = self._g
        order = m.submodules.order = StreamFIFO(unsigned(1), self._notices)
        words = Signal(range(max(g.mask_words(mat) for mat in Matrix) + 1))  # mask words due
        lane = Signal()                         # the lane of the last descriptor
        cmd = self.jobs.payload
        matrix = cmd.arg.descriptor.matrix
        starts = (words == 0) & (cmd.op == EmaOp.DESCRIPTOR)
        dest = Mux(starts, matrix, lane)
        # a descriptor passes only with room for its matrix in the order queue (whose ready
        # does not depend on valid)
        open_ = ~starts | order.w.ready
        for i, port in enumerate(self.lane_jobs):
            m.d.comb += [port.payload.eq(cmd),
                         port.valid.eq(self.jobs.valid & open_ & (dest == i))]
        m.d.comb += self.jobs.ready.eq(open_ & Mux(dest, self.lane_jobs[1].ready,
                                                   self.lane_jobs[0].ready))
        take = self.jobs.valid & self.jobs.ready
        m.d.comb += [order.w.valid.eq(take & starts), order.w.payload.eq(matrix)]
        with m.If(take & starts):
            m.d.sync += [lane.eq(matrix),
                         words.eq(Mux(matrix == Matrix.DOWN, g.mask_words(Matrix.DOWN),
                                      g.mask_words(Matrix.GATE_UP)))]
        with m.Elif(take & (words != 0)):
            m.d.sync += words.eq(words - 1)

        owner = order.r.payload
        for i, port in enumerate(self.lane_issued):
            m.d.comb += [port.payload.eq(self.issued.payload),
                         port.valid.eq(self.issued.valid & order.r.valid & (owner == i))]
        m.d.comb += [self.issued.ready.eq(order.r.valid & Mux(owner, self.lane_issued[1].ready,
                                                              self.lane_issued[0].ready)),
                     order.r.ready.eq(self.issued.valid & self.issued.ready)]
        return m


class MatrixLane(wiring.Component):
    """One matrix's word stream: its command words and notices queued (`depth` words), then
    `MaskWalker` -> `Locator` -> `LineReader` -> `Router` (feeder.py) to the engine's `columns`
    and `scales` ports of `matrix`. `feeding` is high while an item is between the walker and
    the engine."""

    def __init__(self, geometry: EmaGeometry, matrix: Matrix, depth: int):
        self._g = g = geometry
        self._matrix = matrix
        self._depth = depth
        w = g.data_width
        super().__init__({
            "jobs": In(stream.Signature(ema_command_layout)),
            "issued": In(stream.Signature(ema_completion_layout)),
            "filled": In(range(g.lines + 1)),
            "loc": Out(ReadSignature(g.loc_addr_bits, g.line_bits)),
            "buf": Out(line_read_signature(g.line_bits, w)),
            "columns": Out(stream.Signature(column_layout(g.layout.in_channels(matrix), w))),
            "scales": Out(stream.Signature(scale_words_layout(w))),
            "rejected": Out(reject_signature(TopError, OP_BITS)),
            "awaiting": Out(1),
            "hungry": Out(1),
            "waiting": Out(1),
            "feeding": Out(1),
            "ended": Out(1),
            "moved": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        g = self._g
        jobs = m.submodules.jobs = StreamFIFO(ema_command_layout, self._depth)
        issued = m.submodules.issued = StreamFIFO(ema_completion_layout,
                                                  _lane_descriptors(self._depth))
        walker = m.submodules.walker = MaskWalker(g)
        locator = m.submodules.locator = Locator(g)
        reader = m.submodules.reader = LineReader(g)
        router = m.submodules.router = Router(g, g.layout.in_channels(self._matrix))
        connect(m, flipped(self.jobs), jobs.w)
        connect(m, flipped(self.issued), issued.w)
        connect(m, jobs.r, walker.jobs)
        connect(m, issued.r, walker.issued)
        connect(m, walker.channels, locator.channels)
        connect(m, locator.lines, reader.lines)
        connect(m, reader.words, router.words)
        connect(m, locator.loc, flipped(self.loc))
        connect(m, reader.buf, flipped(self.buf))
        connect(m, router.columns, flipped(self.columns))
        connect(m, router.scales, flipped(self.scales))
        connect(m, walker.rejected, flipped(self.rejected))
        m.d.comb += [reader.filled.eq(self.filled),
                     self.awaiting.eq(walker.awaiting), self.hungry.eq(walker.hungry),
                     self.waiting.eq(reader.waiting),
                     self.feeding.eq(walker.channels.valid | locator.lines.valid
                                     | reader.words.valid),
                     self.ended.eq(router.ended), self.moved.eq(router.moved)]
        return m


class BankArbiter(wiring.Component):
    """The lanes' line reads (`readers`, two) onto the weight buffer's banks (`buf`, line L in
    bank L % banks at row L // banks, as `EmaSystem`): each bank serves one read a cycle; when
    both lanes want one bank, one is granted and the other asks again, the lane favoured
    alternating from one clash to the next (two lanes reading runs of lines fall out of step
    after one clash and then rarely meet again). Each word goes back to the reader that was
    granted its line, one cycle later."""

    def __init__(self, geometry: EmaGeometry, banks: int):
        self._g = g = geometry
        self._banks = banks
        row_bits = g.row_bits(banks)
        super().__init__({
            "readers": In(line_read_signature(g.line_bits, g.data_width)).array(2),
            "buf": Out(ReadSignature(row_bits, g.data_width)).array(banks),
        })

    def elaborate(self, platform):
        m = Module()
        banks = self._banks
        bank_bits = (banks - 1).bit_length()
        a, b = self.readers
        bank = [r.line[:bank_bits] if bank_bits else Const(0, 1) for r in self.readers]
        row = [r.line[bank_bits:] for r in self.readers]
        favour = Signal()                   # the reader granted at the next clash
        clash = a.request & b.request & (bank[0] == bank[1])
        m.d.comb += [a.grant.eq(a.request & ~(clash & favour)),
                     b.grant.eq(b.request & ~(clash & ~favour))]
        with m.If(clash):
            m.d.sync += favour.eq(~favour)
        for k, port in enumerate(self.buf):
            m.d.comb += port.addr.eq(Mux(b.grant & (bank[1] == k), row[1], row[0]))
        words = Array(port.data for port in self.buf)
        for r, wanted in zip(self.readers, bank):
            served = Signal(range(banks))   # the bank of the reader's read of the last cycle
            m.d.sync += served.eq(wanted)
            m.d.comb += r.data.eq(words[served])
        return m


class Feeder(wiring.Component):
    """The feeder (docs/blocks/top.md): the EMA's command words (`jobs`, with their `uses`)
    and its notices (`issued`, pulses) queued; with `max_uses` above 1 (a PRU's prefill path)
    the `Replayer` replays descriptor pairs; `MatrixSplit` gives each matrix's descriptors to
    its `MatrixLane`; the lanes' columns and scale blocks go to the engine's `gate_up`,
    `gate_up_scales`, `down` and `down_scales` ports. `loc` (one read port per lane) and `buf`
    (one per bank, through `BankArbiter`) read the EMA's location table and weight buffer.

    Status: `awaiting` (a lane's descriptor waits for its notice), `waiting` (a lane's next
    line is not written yet), `hungry` (a lane waits for a descriptor none is queued for),
    `feeding` (items between the walkers and the engine), `again` (a replay's first word
    taken), `ended` (descriptors whose last word the engine took this cycle, 0..2), `moved`
    (words the engine took this cycle, 0..2); `rejected`, each lane walker's rejections."""

    def __init__(self, geometry: EmaGeometry, banks: int, max_uses: int):
        self._g = g = geometry
        self._banks = banks
        self._max_uses = max_uses
        w = g.data_width
        row_bits = g.row_bits(banks)
        lay = g.layout
        super().__init__({
            "jobs": In(stream.Signature(job_layout(max_uses))),
            "issued": In(issued_signature()),
            "filled": In(range(g.lines + 1)),
            "loc": Out(ReadSignature(g.loc_addr_bits, g.line_bits)).array(len(Matrix)),
            "buf": Out(ReadSignature(row_bits, w)).array(banks),
            "gate_up": Out(stream.Signature(column_layout(lay.in_channels(Matrix.GATE_UP), w))),
            "gate_up_scales": Out(stream.Signature(scale_words_layout(w))),
            "down": Out(stream.Signature(column_layout(lay.in_channels(Matrix.DOWN), w))),
            "down_scales": Out(stream.Signature(scale_words_layout(w))),
            "rejected": Out(reject_signature(TopError, OP_BITS)).array(len(Matrix)),
            "awaiting": Out(1),
            "waiting": Out(1),
            "hungry": Out(1),
            "feeding": Out(1),
            "again": Out(1),
            "ended": Out(2),
            "moved": Out(2),
        })

    def elaborate(self, platform):
        m = Module()
        g = self._g
        jobs = m.submodules.jobs = StreamFIFO(job_layout(self._max_uses), JOB_QUEUE_DEPTH)
        issued = m.submodules.issued = StreamFIFO(ema_completion_layout, ISSUED_QUEUE_DEPTH)
        # descriptors split ahead of their notices: as many as the lanes hold
        notices = len(Matrix) * _lane_descriptors(LANE_QUEUE_DEPTH)
        split = m.submodules.split = MatrixSplit(g, notices)
        connect(m, flipped(self.jobs), jobs.w)
        m.d.comb += [issued.w.valid.eq(self.issued.valid),
                     issued.w.payload.eq(self.issued.payload)]
        if self._max_uses > 1:
            replayer = m.submodules.replayer = Replayer(g, self._max_uses, ahead=notices)
            connect(m, jobs.r, replayer.i_jobs)
            connect(m, issued.r, replayer.i_issued)
            connect(m, replayer.o_jobs, split.jobs)
            connect(m, replayer.o_issued, split.issued)
            m.d.comb += self.again.eq(replayer.again)
        else:
            m.d.comb += [split.jobs.valid.eq(jobs.r.valid),
                         split.jobs.payload.eq(jobs.r.payload.cmd),
                         jobs.r.ready.eq(split.jobs.ready)]
            connect(m, issued.r, split.issued)
        arbiter = m.submodules.arbiter = BankArbiter(g, self._banks)
        bring_out(m, self.buf, arbiter.buf)
        lanes = []
        for matrix, name in ((Matrix.GATE_UP, "gate_up"), (Matrix.DOWN, "down")):
            lane = m.submodules[f"{name}_lane"] = MatrixLane(g, matrix, LANE_QUEUE_DEPTH)
            lanes.append(lane)
            connect(m, split.lane_jobs[matrix], lane.jobs)
            connect(m, split.lane_issued[matrix], lane.issued)
            connect(m, lane.buf, arbiter.readers[matrix])
            connect(m, lane.loc, flipped(self.loc[matrix]))
            connect(m, lane.columns, flipped(getattr(self, name)))
            connect(m, lane.scales, flipped(getattr(self, f"{name}_scales")))
            connect(m, lane.rejected, flipped(self.rejected[matrix]))
            m.d.comb += lane.filled.eq(self.filled)
        m.d.comb += [self.awaiting.eq(lanes[0].awaiting | lanes[1].awaiting),
                     self.waiting.eq(lanes[0].waiting | lanes[1].waiting),
                     self.hungry.eq(lanes[0].hungry | lanes[1].hungry),
                     self.feeding.eq(lanes[0].feeding | lanes[1].feeding),
                     self.ended.eq(lanes[0].ended + lanes[1].ended),
                     self.moved.eq(lanes[0].moved + lanes[1].moved)]
        return m
