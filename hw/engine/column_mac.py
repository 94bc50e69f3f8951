"""The MAC array of one matrix: every candidate of a group times every column the weight buffer
delivers, into accumulators as wide as the group's sums can grow (`sum_bits`)."""

from __future__ import annotations

from amaranth.hdl import Cat, Module, Mux, Signal, signed
from amaranth.lib import data, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from .layouts import (ACC_WIDTH, check_positive, check_split, check_word, column_layout,
                      index_bits, sum_layout, x_layout)

__all__ = ["ColumnMac", "accumulate", "sum_bits"]

#: the largest product magnitude: int8 x int4 over their whole two's-complement ranges,
#: (-128) x (-8) (the ports carry any bits; docs/contracts.md keeps values in [-127, 127] and
#: [-7, 7], which this bound covers)
PRODUCT_MAX = 128 * 8
#: the product's signed width (-1016 .. 1024)
PRODUCT_BITS = 12


def sum_bits(channels: int) -> int:
    """Signed bits that hold every sum of `channels` products exactly: a group's accumulator
    starts at 0 and takes at most one product per input channel, so |sum| <= channels x 1024.
    The contract's accumulators are exact int32 sums (docs/contracts.md, number formats); these
    are the same values in fewer bits (19 for the bundled 192 channels), sign-extended to int32
    as they leave the array."""
    return min(ACC_WIDTH, (channels * PRODUCT_MAX).bit_length() + 1)


def accumulate(acc, product):
    """`acc` + `product` (a signed product of at most `PRODUCT_BITS`), wrapped to len(acc) bits,
    as a carry-select add: the product, sign-extended, is added to the accumulator's low
    `PRODUCT_BITS` + 1 bits, and the high part, to which the sign-extended product adds only 0
    or -1 and the low add's carry 0 or 1, is picked from hi - 1, hi and hi + 1, computed beside
    the low add. As one add, the mapping rippled the carry through every bit (the 32-bit add was
    the gated engine's critical path, docs/synthesis.md "Clock gating")."""
    width, low_bits = len(acc), PRODUCT_BITS + 1
    product = product.as_signed()
    if width <= low_bits:
        return (acc.as_signed() + product)[:width].as_signed()
    sign = product[-1]
    low = acc[:low_bits] + Cat(product, sign.replicate(low_bits - len(product)))
    carry = low[low_bits]
    high = acc[low_bits:width]
    new_high = Mux(carry & ~sign, high + 1, Mux(~carry & sign, high - 1, high))
    return Cat(low[:low_bits], new_high[:width - low_bits]).as_signed()


class ColumnMac(wiring.Component):
    """int8 x int4 products of `candidates` activation rows with a matrix's columns.

    Storage (docs/weight-layout.md): input channel j's column holds the matrix's `outputs` int4
    values, element 2i in the low nibble of byte i; it arrives as the buffer words that hold them
    (`words_per_column` words of `word_bits`), each tagged with j. Columns come in any order and
    any subset: a channel that never arrives contributes nothing, which is what a channel mask
    means (docs/contracts.md: masks change which products enter the sums).

    A group goes through three phases, each running beside the other two on other groups:
    1. Load: `act` beats (candidate, beat, `act_values` int8 of channels beat * act_values ..)
       into one of two banks of the activation memory until `last`, one beat per cycle; the
       last beat's candidate is the group's last (candidates are 0..n-1). A bank takes the next
       group once the MAC has read the one before out of it. With `early` (the DOWN array, whose
       inputs are the quantizer's values, one per beat, candidate-major and in channel order),
       `act_final` marks the beats of the group's last candidate, and the MAC starts on the
       bank while that candidate still loads: a column whose channel's row that candidate has
       written may go in (every candidate before it is loaded whole), the group's last column
       only once the bank is loaded. The last candidate's F cycles of loading then overlap its
       MAC instead of preceding it (a layer's last group has nothing else to overlap).
       With `masked`, `act_mask` holds each candidate's channels for the group in the MAC (the
       caller keeps it steady from the group's first column to its last): a column outside a
       candidate's mask multiplies that candidate's input as 0, so each candidate of a group
       may take its own subset of the columns the group walks.
    2. Mac: per column word, per `lanes`-wide chunk of it, `lanes` products
       act[c][j] * w[o..o+lanes-1] for *every* candidate c of the group at once, added into the
       accumulators (`sum_bits(channels)` bits: a group's sums, exact; they leave the array as
       int32): `lanes` x `candidates` multipliers.
       One chunk per cycle whatever the group's size: a word takes `chunks_per_word` cycles
       while the column stream is valid (one at lanes = word_bits / 4, so a word is consumed in
       the cycle it arrives); `columns.ready` rises on its last cycle. Three cycles after the last
       chunk the sums move, in one cycle, to a second set of registers (`held`) once the drain
       has let the group before go, and the next group's Mac may start.
    3. Drain: every (candidate, output) held sum, candidate-major, on `sums` (a register,
       latency 1): one output
       per cycle, or `parts` side by side, by `split` (layouts.SPLITS): "halves", output o and
       o + outputs / 2 (GATE_UP's gate and up of one hidden channel, so the SwiGLU needs no
       memory of gates and the drain takes F cycles per candidate, not 2F), or "neighbours",
       outputs parts x o .. parts x o + parts - 1 (DOWN: four expert outputs a cycle, D / 4
       cycles per candidate, out of one accumulator row).

    The activation memory is `act_values` memories, one per place in a beat (memory k holds
    channels beat x act_values + k, a row of every candidate's int8, written one candidate's
    element at a time, every memory in the beat's cycle). A chunk is three stages: (1) taken,
    its channel's row read from the one memory of its place (a registered read with an enable,
    as an SRAM's: only when a chunk is taken, a candidate row of 8 x `candidates` bits); (2)
    each candidate's input picked from that memory and masked, into a register with the
    chunk's weights; (3) multiplied and added. Until 2026-12-05 one memory of whole beats was
    read asynchronously every cycle, `act_values` times the bits used (1,024 bits a cycle at
    the bundled size), and the pick and the register were one stage. The register before the
    multipliers stays: the read and its broadcast to `lanes` x `candidates` multipliers were
    one 12.6 ns path at 180 nm, 578 MHz at 28 nm. The last chunk's sums are in two cycles
    after it is taken. The accumulators are registers next to the multipliers, a row of `lanes`
    sums per (candidate, chunk): a cycle selects one chunk's row of every candidate through a
    multiplexer per candidate and writes back the rows of the group's candidates, one write
    enable per candidate (a candidate beyond the group's last is neither written nor drained). An
    SRAM there (as before 2026-12-01) read and wrote a whole row every MAC cycle, 95 % of the
    engine's energy per MAC at 28 nm (docs/blocks/engine.md, synthesis). The held set is read
    only by the drain, through a (candidate, chunk) multiplexer per part, and written only by
    the hand-over. Nothing is cleared: a flag per chunk says its rows hold no sum of this group
    yet, so the chunk's first MAC write adds to 0 and a chunk no column reached drains as 0; the
    hand-over gives the flags to the held set and sets every one, and so does the reset: a
    group cut off by a reset leaves no partial sums behind.
    """

    def __init__(self, channels: int, outputs: int, candidates: int, lanes: int, word_bits: int,
                 act_values: int, parts: int = 1, split: str = "halves", early: bool = False,
                 masked: bool = False):
        check_positive("channels", channels)
        check_positive("outputs", outputs)
        check_positive("candidates", candidates, 1, 64)
        check_word(lanes, word_bits)
        # a beat of inputs is at most a word of int8 (edgexpert.contracts.top.inputs_per_beat),
        # a power of two so that a channel's beat and place in it are bit fields
        check_positive("act_values", act_values, 1, word_bits // 8)
        if act_values & (act_values - 1):
            raise TypeError(f"act_values must be a power of two in 1..{word_bits // 8}, "
                            f"not {act_values!r}")
        self._n, self._o, self._c = channels, outputs, candidates
        self._p, self._w, self._v, self._parts = lanes, word_bits, act_values, parts
        self._split = check_split(split, parts, outputs)
        self._early, self._masked = early, masked
        super().__init__({
            "act": In(stream.Signature(x_layout(candidates, channels, act_values))),
            **({"act_final": In(1)} if early else {}),
            **({"act_mask": In(data.ArrayLayout(channels, candidates))} if masked else {}),
            "columns": In(stream.Signature(column_layout(channels, word_bits))),
            "sums": Out(stream.Signature(sum_layout(candidates, outputs, parts))),
        })

    @property
    def chunks_per_word(self) -> int:
        return self._w // 4 // self._p

    @property
    def words_per_column(self) -> int:
        # a column is ceil(outputs / 2) bytes (WeightLayout.column_bytes) starting on a word
        return -(-(-(-self._o // 2) * 8) // self._w)

    @property
    def n_chunks(self) -> int:
        return -(-self._o // self._p)

    def elaborate(self, platform):
        m = Module()
        n_ch, outs, cands, lanes = self._n, self._o, self._c, self._p
        cpw, wpc, n_chunks = self.chunks_per_word, self.words_per_column, self.n_chunks
        per, per_bits = self._v, self._v.bit_length() - 1
        all_fresh = (1 << n_chunks) - 1
        # two banks of inputs: the next group loads into one while the MAC reads the other
        rows_per_bank = -(-n_ch // per)
        # each bank is `per` memories, one per place in a beat (memory k holds channels
        # beat x per + k, every candidate's int8 in a row): a MAC cycle reads one candidate row
        # of the one memory its column's channel is in, where one memory of whole beats read
        # `per` times the bits (1,024 a cycle at the bundled size for the 32 used), and reads
        # only when a column is taken (a registered read with an enable, as an SRAM's)
        act_ports = []
        for k in range(per):
            act_mem = Memory(shape=data.ArrayLayout(signed(8), cands), depth=2 * rows_per_bank,
                             init=[])
            m.submodules[f"act_mem_{k}"] = act_mem
            # a write takes one candidate's int8 (an array element)
            act_ports.append((act_mem.write_port(granularity=1), act_mem.read_port()))
        # the MAC's accumulator rows: `acc_addr` selects the chunk whose row of every candidate
        # is read (acc_rd[c]) and written (acc_wr[c]), with a write enable per candidate (its
        # row's 1,216 bits on GATE_UP at the bundled size share it) so that the MAC writes only
        # the group's candidates
        # a group's sums need sum_bits(channels) bits, not the contract's 32: the rows, their
        # adds, the row multiplexers and the hand-over are that wide (19 of 32 bits at the
        # bundled size), and a drained sum is sign-extended to int32
        acc_bits = sum_bits(n_ch)
        acc_layout = data.ArrayLayout(signed(acc_bits), lanes)
        rows = [[Signal(acc_layout, name=f"acc_{c}_{r}") for r in range(n_chunks)]
                for c in range(cands)]
        # the drain's copy of them: a group's sums move here in one cycle when its MAC ends, so
        # the next group's MAC runs while this one drains (one set made the two follow each
        # other: a group's MAC, then its drain, on each array)
        held = [[Signal(acc_layout, name=f"held_{c}_{r}") for r in range(n_chunks)]
                for c in range(cands)]
        acc_addr = Signal(range(n_chunks))
        acc_rd = Signal(data.ArrayLayout(acc_layout, cands))
        acc_wr = Signal(data.ArrayLayout(acc_layout, cands))
        acc_wr_en = Signal(cands)
        with m.Switch(acc_addr):
            for r in range(n_chunks):
                with m.Case(r):
                    for c in range(cands):
                        m.d.comb += acc_rd[c].eq(rows[c][r])
                        with m.If(acc_wr_en[c]):
                            m.d.sync += rows[c][r].eq(acc_wr[c])

        # a chunk's rows hold no sum of the present group until its first MAC write, which
        # adds to 0 instead of the row: the drain reads such a row as 0, and nothing is cleared
        # (the reset sets every flag, so a group cut off by a reset leaves nothing); the held
        # rows keep their group's flags
        fresh = Signal(n_chunks, init=all_fresh)
        held_fresh = Signal(n_chunks, init=all_fresh)

        # the input banks: `loaded` per bank from its group's last beat until its MAC ends
        loaded = Signal(2)
        load_bank = Signal()
        mac_bank = Signal()
        bank_last = [Signal(index_bits(cands), name=f"bank_last_{b}") for b in range(2)]
        item = self.act.payload
        load_base = Mux(load_bank, rows_per_bank, 0)
        m.d.comb += self.act.ready.eq(~loaded.bit_select(load_bank, 1))
        # a beat goes to every memory, its place k's int8 into memory k, the candidate's element
        for (act_wr, _), place in zip(act_ports, item.values):
            m.d.comb += [act_wr.addr.eq(load_base + item.beat),
                         act_wr.data.eq(place.replicate(cands)),
                         act_wr.en.eq((self.act.valid & self.act.ready) << item.candidate)]
        with m.If(self.act.valid & self.act.ready & item.last):
            m.d.sync += load_bank.eq(~load_bank)
            for b in range(2):
                with m.If(load_bank == b):
                    m.d.sync += [loaded[b].eq(1), bank_last[b].eq(item.candidate)]

        # `early`: rows of the loading bank the group's last candidate has written (its beats
        # come in order), readable from the cycle after each write; 0 until that candidate's
        # first beat and again once the group's last beat is in. The bank's last candidate is
        # known from that first beat on (the MAC reads it only once it may start on the bank)
        final_rows = Signal(range(rows_per_bank + 1))
        if self._early:
            with m.If(self.act.valid & self.act.ready & self.act_final):
                m.d.sync += final_rows.eq(Mux(item.last, 0, item.beat + 1))
                for b in range(2):
                    with m.If(load_bank == b):
                        m.d.sync += bank_last[b].eq(item.candidate)

        last_cand = Signal(index_bits(cands))    # the MAC's group's last candidate
        chunk = Signal(index_bits(cpw))
        word = Signal(index_bits(wpc))
        col = self.columns.payload
        # chunk g of the column holds outputs g*lanes .. g*lanes + lanes - 1
        g = Signal(index_bits(wpc * cpw))
        m.d.comb += g.eq(word * cpw + chunk)

        # the MAC's three stages: (1) a column's chunk is taken and its inputs read from the
        # memories, (2) every candidate's input picked from its memory and masked, (3) the chunk
        # times the inputs, added into the chunk's row of every candidate of the group (a row's
        # first write adds to 0). Stages 2 and 3 hold their registers between chunks, so an
        # idle array's multipliers see no new operands.
        read_valid, read_row = Signal(), Signal.like(g)
        read_w = Signal(4 * lanes)
        read_place = Signal(max(1, per_bits))
        read_mask = Signal(cands)
        mac_valid = Signal()
        mac_row = Signal.like(g)
        mac_w = Signal(4 * lanes)
        mac_x = Signal(data.ArrayLayout(signed(8), cands))
        m.d.sync += mac_valid.eq(read_valid)
        with m.If(read_valid):
            m.d.sync += [mac_row.eq(read_row), mac_w.eq(read_w)]
            with m.Switch(read_place):
                for k, (_, act_rd) in enumerate(act_ports):
                    with m.Case(k):
                        # a column outside a candidate's mask adds 0 to its sums
                        m.d.sync += [mac_x[c].eq(Mux(read_mask[c], act_rd.data[c], 0))
                                     for c in range(cands)]
        w = [mac_w[4 * i:4 * i + 4].as_signed() for i in range(lanes)]
        first = fresh.bit_select(mac_row, 1)
        with m.If(mac_valid):
            m.d.comb += acc_addr.eq(mac_row)
            for r in range(n_chunks):
                with m.If(mac_row == r):
                    m.d.sync += fresh[r].eq(0)
            # all the sums in one conditional block: as one process in the emitted Verilog,
            # the rows' write logic wakes once a cycle; unconditional, each lane's sum became a
            # continuous assignment of its own, and every one of them woke every row (Icarus
            # simulated the bundled engine ~400x slower)
            for c in range(cands):
                m.d.comb += [acc_wr[c][i].eq(accumulate(Mux(first, 0, acc_rd[c][i]),
                                                        mac_x[c] * w[i]))
                             for i in range(lanes)]
                m.d.comb += acc_wr_en[c].eq(c <= last_cand)

        # the drain: its group's last candidate, the candidate and output it reads
        draining = Signal()
        drain_last = Signal(index_bits(cands))
        cand = Signal(index_bits(cands))
        half = outs // self._parts
        out = Signal(index_bits(half))
        neighbours = self._split == "neighbours"

        def output_of(p, o):
            """The output a drain step `o` reads in part `p`."""
            return o * self._parts + p if neighbours else p * half + o

        # the drain's lane of each part as a one-hot register (lane = output % lanes): each bit
        # selects its lane's 32 bits, where a binary lane number would drive all 2,048 of them;
        # a step moves it one output on (halves) or `parts` (neighbours)
        first_lane = [output_of(p, 0) % lanes for p in range(self._parts)]
        lane_step = self._parts if neighbours else 1
        lane_hot = [Signal(lanes, init=1 << first_lane[p], name=f"lane_hot_{p}")
                    for p in range(self._parts)]

        def lane_of(row, hot):
            """The lane of `row` that the one-hot `hot` selects: AND-OR as a balanced tree
            (log2(lanes) levels of OR)."""
            terms = [Mux(hot[i], row[i], 0) for i in range(lanes)]
            while len(terms) > 1:
                terms = [a | b for a, b in zip(terms[::2], terms[1::2])] + terms[len(terms) & ~1:]
            return terms[0]

        shift = lanes.bit_length() - 1   # lanes divides a power of two: one itself
        drained = []                     # per part: the drained (candidate, output)'s sum
        first_row = None                 # the first part's row
        for p in range(self._parts):
            chunk_p = Signal(range(n_chunks), name=f"drain_chunk_{p}")
            m.d.comb += chunk_p.eq(output_of(p, out) >> shift)
            if neighbours and lanes % self._parts == 0 and p > 0:
                # neighbours share a chunk, so every part reads the first part's row
                drained.append(Mux(held_fresh.bit_select(chunk_p, 1), 0,
                                   lane_of(first_row, lane_hot[p])))
                continue
            # a case per (candidate, chunk), not held[cand][chunk]: Amaranth's netlist check
            # walks an indexed part's every input bit for each output bit (minutes at 2,048)
            row = Signal(acc_layout, name=f"drain_row_{p}")
            first_row = row if p == 0 else first_row
            with m.Switch(Cat(chunk_p, cand)):
                for c in range(cands):
                    for r in range(n_chunks):
                        with m.Case(r | c << len(chunk_p)):
                            m.d.comb += row.eq(held[c][r])
            drained.append(Mux(held_fresh.bit_select(chunk_p, 1), 0, lane_of(row, lane_hot[p])))

        advance = ~self.sums.valid | self.sums.ready
        with m.If(self.sums.ready):
            m.d.sync += self.sums.valid.eq(0)
        with m.If(draining):
            last_out = out == half - 1
            value = Cat(*(Cat(d[:acc_bits], d[acc_bits - 1].replicate(ACC_WIDTH - acc_bits))
                          for d in drained))
            # the sum is registered: the row and lane selection end at a flip-flop, and the
            # requantizer's products start at one
            with m.If(advance):
                m.d.sync += [
                    self.sums.valid.eq(1),
                    self.sums.payload.candidate.eq(cand),
                    self.sums.payload.index.eq(out),
                    self.sums.payload.value.eq(value),
                    self.sums.payload.last.eq((cand == drain_last) & last_out),
                ]
                m.d.sync += [hot.eq(Mux(last_out, 1 << first_lane[p],
                                        hot.rotate_left(lane_step)))
                             for p, hot in enumerate(lane_hot)]
                m.d.sync += out.eq(out + 1)
                with m.If(last_out):
                    m.d.sync += [out.eq(0), cand.eq(cand + 1)]
                    with m.If(cand == drain_last):
                        m.d.sync += [cand.eq(0), draining.eq(0)]

        # stage 1's reads: the taken column's channel, in the one memory of its place
        reading = Signal()
        for k, (_, act_rd) in enumerate(act_ports):
            in_place = (col.channel[:per_bits] == k) if per > 1 else 1
            m.d.comb += [act_rd.addr.eq(Mux(mac_bank, rows_per_bank, 0)
                                        + (col.channel >> per_bits)),
                         act_rd.en.eq(reading & in_place)]

        bank_loaded = loaded.bit_select(mac_bank, 1)
        # the bank the MAC reads is still loading its group's last candidate (`early` only)
        loading = (mac_bank == load_bank) & (final_rows != 0)
        # the column's input row is in: the bank is loaded, or the last candidate wrote it (and
        # the group's last column waits for the whole group, so the MAC never ends on a bank
        # that is still loading)
        row_in = bank_loaded | (loading & ~col.last & ((col.channel >> per_bits) < final_rows))
        with m.FSM(name="phase"):
            with m.State("Wait"):
                with m.If(bank_loaded | loading):
                    m.d.sync += [last_cand.eq(Mux(mac_bank, bank_last[1], bank_last[0])),
                                 chunk.eq(0), word.eq(0)]
                    m.next = "Mac"
            with m.State("Mac"):
                # stage 1: the chunk taken, its weights registered and its channel's row read;
                # stages 2 and 3 follow a cycle and two later (above)
                chunk_bits = col.data.word_select(chunk, 4 * lanes) if cpw > 1 else col.data
                take = self.columns.valid & row_in
                m.d.comb += reading.eq(take & (g < n_chunks))
                m.d.sync += read_valid.eq(reading)
                with m.If(reading):
                    m.d.sync += [read_row.eq(g), read_w.eq(chunk_bits[:4 * lanes])]
                    if per > 1:
                        m.d.sync += read_place.eq(col.channel[:per_bits])
                    m.d.sync += read_mask.eq(Cat(self.act_mask[c].bit_select(col.channel, 1)
                                                 for c in range(cands)) if self._masked
                                             else (1 << cands) - 1)
                word_done = (chunk == cpw - 1) | (g == n_chunks - 1)
                with m.If(take):
                    with m.If(word_done):
                        m.d.comb += self.columns.ready.eq(1)
                        m.d.sync += [chunk.eq(0), word.eq(Mux(word == wpc - 1, 0, word + 1))]
                        with m.If(col.last):
                            # the inputs are read: their bank takes the group after next
                            for b in range(2):
                                with m.If(mac_bank == b):
                                    m.d.sync += loaded[b].eq(0)
                            m.d.sync += mac_bank.eq(~mac_bank)
                            m.next = "Pick"
                    with m.Else():
                        m.d.sync += chunk.eq(chunk + 1)
            with m.State("Pick"):
                # the last chunk's inputs are picked (stage 2)
                m.d.sync += read_valid.eq(0)
                m.next = "Settle"
            with m.State("Settle"):
                # the last chunk's stage 3 writes its rows: they are whole from the next cycle
                m.next = "Hand"
            with m.State("Hand"):
                # the sums move to the drain once it has let the group before go
                with m.If(~draining):
                    for c in range(cands):
                        for r in range(n_chunks):
                            m.d.sync += held[c][r].eq(rows[c][r])
                    m.d.sync += [held_fresh.eq(fresh), fresh.eq(all_fresh),
                                 drain_last.eq(last_cand), draining.eq(1), out.eq(0),
                                 cand.eq(0)]
                    m.d.sync += [hot.eq(1 << first_lane[p]) for p, hot in enumerate(lane_hot)]
                    m.next = "Wait"
        return m
