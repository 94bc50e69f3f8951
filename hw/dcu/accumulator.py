"""Stage 3: I_j = sum_c |q[c, j]| * W_c, one data beat (32 channels of one candidate) per cycle,
into the importance memory."""

from __future__ import annotations

from amaranth.hdl import Cat, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.memory import WritePort
from amaranth.lib.wiring import In, Out

from ...contracts.dcu import COUNT_BITS, LANES, DcuError, dcu_data_layout
from ...contracts.weight_layout import Matrix
from .collector import job_layout
from .geometry import IMPORTANCE_BITS, WEIGHT_BITS, DcuGeometry
from ..streams import ReadSignature

__all__ = ["importance_layout", "Accumulator"]

#: one word of the importance memory: 32 channels' 29-bit sums
importance_layout = data.ArrayLayout(IMPORTANCE_BITS, LANES)
#: copies of the first-candidate flag and of the weight (below): two reset values, with and
#: without a reset
COPIES = 4


class Accumulator(wiring.Component):
    """Channel-parallel, candidate-serial: 32 multipliers (|q| 8 bits x W 16 bits) and 32
    adders, a register between them. A beat is taken every cycle of a job (`data.ready` is high
    while the job lasts); the cycle it is taken, it and its candidate's weight (read the cycle
    before) are registered; on the next, the products are computed into the register and the
    word's partial sums read; on the next, the sums plus the products are written back (the
    first candidate writes its products alone). The importance memory's read port must be
    transparent to its write port, so a matrix of one word can take a beat every cycle. Each
    job takes n * ceil(C / 32) cycles plus three: the job goes on once its last write has
    landed and the OR of the final sums is in a register. The sums go to the job's bank of
    the importance memory. A rejected job's data beats (n x words of them, n up to 127) are
    taken and dropped: neither multiplied nor written."""

    def __init__(self, geometry: DcuGeometry):
        self._g = geometry
        super().__init__({
            "i_job": In(stream.Signature(job_layout)),
            "o_job": Out(stream.Signature(job_layout)),
            "data": In(stream.Signature(dcu_data_layout)),
            "weight_rd": Out(ReadSignature(geometry.cand_bits, WEIGHT_BITS)),
            "sums_rd": Out(ReadSignature(geometry.bank_addr_bits, importance_layout.size)),
            # the importance memory is read only for a beat in stage 1 (its read energy)
            "sums_rd_en": Out(1),
            "sums_wr": In(WritePort.Signature(addr_width=geometry.bank_addr_bits,
                                              shape=importance_layout)),
        })

    def elaborate(self, platform):
        m = Module()
        g = self._g
        job = Signal(job_layout)
        word = Signal(g.word_bits)
        cand = Signal(COUNT_BITS)
        rejected = job.error != DcuError.NONE
        last_word = Mux(job.header.matrix == Matrix.DOWN, g.words(Matrix.DOWN) - 1,
                        g.words(Matrix.GATE_UP) - 1)
        taken = self.data.valid & self.data.ready

        # the cycle a beat is taken: its magnitudes and its candidate's weight (read on the cycle
        # before: the weight memory's address is the candidate of the next cycle) are
        # registered; stage 1, the cycle after: they are multiplied into a register; stage 2,
        # the cycle after that: the products plus the word's partial sums (read in stage 1) are
        # written back. The multiply-add was 10.9 ns at 180 nm in one cycle (docs/blocks/dcu.md)
        pending = Signal()      # stage 1 holds a beat
        adding = Signal()       # stage 2 holds a beat
        # no reset: read only behind `pending` and `adding` (and a reset into 1,024 more
        # flip-flops was the full-size point's critical path, 9.3 ns at 180 nm)
        magnitudes = [Signal(8, name=f"magnitude{i}", reset_less=True) for i in range(LANES)]
        products = [Signal(8 + WEIGHT_BITS, name=f"product{i}", reset_less=True)
                    for i in range(LANES)]
        at, at_add = Signal(g.word_bits), Signal(g.word_bits)
        final = Signal()        # the job's last candidate: its sums are the importance
        # stage 2 holds a beat of the last candidate (not `adding & final`: `adding` is the
        # importance memory's write enable, which the cut-out memory sees as 928 loads)
        finishing = Signal()
        first = Signal()
        # stage 2's first-candidate flag in four copies, each clearing the old sums of 8 lanes:
        # one flip-flop driving all 928 bits took 5.4 ns to switch (11.5 ns path at 180 nm; the
        # flow inserts no buffer trees). The copies differ in reset value and in having a reset
        # at all, so synthesis does not merge them back; none is read before a beat sets it
        first_add = [Signal(name=f"first_add{k}", init=k % 2, reset_less=k >= 2)
                     for k in range(COPIES)]
        # the weight in four copies the same way, each into 8 lanes' multipliers: the memory's
        # read data into all 32 (256 gates per bit) was 4.6 ns of a 10.6 ns path
        weights = [Signal(WEIGHT_BITS, name=f"weight{k}", init=(2**WEIGHT_BITS - 1) * (k % 2),
                          reset_less=k >= 2) for k in range(COPIES)]
        cand_next = Signal(g.cand_bits)         # the weight memory's address
        m.d.comb += cand_next.eq(cand)
        m.d.sync += [pending.eq(taken & ~rejected), adding.eq(pending)]
        with m.If(taken):
            m.d.sync += [at.eq(word), first.eq(cand == 0), final.eq(cand == job.header.count - 1)]
            for i in range(LANES):
                lane = self.data.payload.lanes[i]
                m.d.sync += magnitudes[i].eq(Mux(lane < 0, -lane, lane))
            m.d.sync += [copy.eq(self.weight_rd.data) for copy in weights]
        m.d.sync += [at_add.eq(at), finishing.eq(pending & final)]
        m.d.sync += [copy.eq(first) for copy in first_add]
        m.d.sync += [p.eq(mag * weights[i * COPIES // LANES])
                     for i, (p, mag) in enumerate(zip(products, magnitudes))]
        old = data.View(importance_layout, self.sums_rd.data)
        # one signal per lane (not one 928-bit signal written in slices): event-driven simulators
        # wake every reader of a wide signal whenever any slice of it changes
        lanes = [Signal(IMPORTANCE_BITS, name=f"sum{i}") for i in range(LANES)]
        for i, lane in enumerate(lanes):
            m.d.comb += lane.eq(Mux(first_add[i * COPIES // LANES], 0, old[i]) + products[i])
        sums = Cat(*lanes)

        # the OR of the final sums: the selector skips the key bits no channel has
        top = Signal(IMPORTANCE_BITS)
        top_now = Signal(IMPORTANCE_BITS)
        level = lanes
        while len(level) > 1:
            level = [level[i] | level[i + 1] for i in range(0, len(level), 2)]
        m.d.comb += top_now.eq(Mux(finishing, top | level[0], top))
        m.d.sync += top.eq(top_now)
        # a beat's partial sums are read in stage 1, so a one-word matrix's next beat reads the
        # word as the previous one writes it: the read port is transparent to the write port
        m.d.comb += [self.sums_wr.addr.eq(g.bank_address(at_add, job.bank)),
                     self.sums_wr.data.eq(sums),
                     self.sums_wr.en.eq(adding),
                     self.weight_rd.addr.eq(cand_next),
                     self.sums_rd.addr.eq(g.bank_address(at, job.bank)),
                     self.sums_rd_en.eq(pending)]

        with m.FSM():
            with m.State("Idle"):
                m.d.comb += self.i_job.ready.eq(1)
                with m.If(self.i_job.valid):
                    m.d.comb += cand_next.eq(0)
                    m.d.sync += [job.eq(self.i_job.payload), word.eq(0), cand.eq(0), top.eq(0)]
                    # a count of 0 (a rejected job) announces no data
                    with m.If(self.i_job.payload.header.count == 0):
                        m.next = "Offer"
                    with m.Else():
                        m.next = "Run"
            with m.State("Run"):
                m.d.comb += self.data.ready.eq(1)
                with m.If(taken):
                    m.d.sync += word.eq(word + 1)
                    with m.If(word == last_word):
                        m.d.comb += cand_next.eq(cand + 1)
                        m.d.sync += [word.eq(0), cand.eq(cand + 1)]
                        with m.If(cand == job.header.count - 1):
                            m.next = "Drain"
            with m.State("Drain"):
                # the last beat is in stage 1
                m.next = "Write"
            with m.State("Write"):
                # the last beat's sums are written now; `top` holds their OR on the next cycle
                # (offering top_now instead would put the adders and the selector's priority
                # encoder on one path: 12.9 ns at 180 nm)
                m.next = "Offer"
            with m.State("Offer"):
                m.d.comb += [self.o_job.valid.eq(1), self.o_job.payload.eq(job),
                             self.o_job.payload.top.eq(top)]
                with m.If(self.o_job.ready):
                    m.next = "Idle"
        return m
