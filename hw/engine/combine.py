"""The routing-weighted sum over a token's experts, and its read-out."""

from __future__ import annotations

from amaranth.hdl import Cat, Module, Mux, Signal, signed, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from ...contracts.top import EXPERT_OUT_VALUES
from .layouts import (Q16_WIDTH, WEIGHT_BITS, check_positive, flush_layout, index_bits,
                      moe_layout, sum_layout)

__all__ = ["Combine"]


class Combine(wiring.Component):
    """moe_out[t][d] += rshift(y[d] * g, 16) for every expert output y of a candidate whose token
    slot is t and routing weight g (docs/contracts.md, mixture of experts step 4).

    A memory of `tokens` x d_model int32 sums (wrapping like int32 registers; the contract keeps
    the residual in int32), a row of `values` sums per address, takes a `y` beat of P =
    EXPERT_OUT_VALUES outputs per cycle (outputs P j .. P j + P - 1, as the DOWN drain gives
    them), weighted as they are taken and added the cycle after into P lanes of one row,
    written with an enable per lane, so the row's read-modify-write never meets the next
    beat's lanes;
    `group_done` pulses with the group's last. `flush` asks for token t's sums: they leave on
    `moe_out` a row per cycle (edgexpert.contracts.top.outputs_per_beat: a word of sums), so a
    token takes ceil(D / values) cycles, not D. A flush goes first: `y` waits while one is
    offered and during it (the caller offers a flush only once every group before it is
    taken in, `group_done`, so the `y` it holds back belongs to a later group); it starts once
    the last beat taken is in the memory. `token[c]` and `weight[c]` are
    candidate c's, held by the caller for the group; a candidate's beats come in index order.
    A register bit per slot, not the memory, says a slot is empty: set by the reset and by the
    slot's flush, cleared by the last beat of the first candidate written into it. An empty
    slot's sums read as 0, so the first candidate writes its terms over whatever the memory
    holds, a flush writes nothing back, and a reset mid-step leaves no partial sums behind.
    Width: |y * g| <= 2**31 * 2**16, the rounded shift leaves at most 2**31.
    """

    def __init__(self, candidates: int, d_model: int, tokens: int, values: int):
        check_positive("candidates", candidates, 1, 64)
        check_positive("d_model", d_model)
        if d_model % EXPERT_OUT_VALUES:
            raise TypeError(f"d_model must be a multiple of {EXPERT_OUT_VALUES} (y comes in "
                            f"beats of {EXPERT_OUT_VALUES}), not {d_model!r}")
        check_positive("tokens", tokens, 1, 4096)
        check_positive("values", values, EXPERT_OUT_VALUES, 32)
        if values & (values - 1):
            raise TypeError(f"values must be a power of two in {EXPERT_OUT_VALUES}..32, "
                            f"not {values!r}")
        self._c, self._d, self._t, self._v = candidates, d_model, tokens, values
        super().__init__({
            "y": In(stream.Signature(sum_layout(candidates, d_model, EXPERT_OUT_VALUES))),
            "token": In(data.ArrayLayout(unsigned(index_bits(tokens)), candidates)),
            "weight": In(data.ArrayLayout(unsigned(WEIGHT_BITS), candidates)),
            "group_done": Out(1),
            "flush": In(stream.Signature(flush_layout(tokens))),
            "moe_out": Out(stream.Signature(moe_layout(tokens, d_model, values))),
        })

    def elaborate(self, platform):
        m = Module()
        d_model, per = self._d, self._v
        rows = -(-d_model // per)
        y_values = EXPERT_OUT_VALUES
        beats_per_row = per // y_values
        m.submodules.sums = sums = Memory(shape=data.ArrayLayout(signed(Q16_WIDTH), per),
                                          depth=self._t * rows, init=[])
        # the read is registered, with an enable, as an SRAM's: a row only for a beat taken or
        # a flush's next row (an asynchronous read every cycle read 5x the bits the stimulus
        # used, docs/blocks/engine.md "Energy"); transparent, so a beat reads the lanes the
        # beat before is writing to the same row in that cycle
        wr = sums.write_port(granularity=1)
        rd = sums.read_port(transparent_for=(wr,))
        m.d.comb += rd.en.eq(0)
        empty = Signal(self._t, init=(1 << self._t) - 1)
        token = Signal(index_bits(self._t))
        beat = Signal(range(rows))
        # the weighting, a product per value, ends at a register (`s1`); the next cycle adds it
        # into the memory row (read, add, write in one cycle: nothing else touches the row)
        place_bits = beats_per_row.bit_length() - 1
        s1_valid, s1_slot = Signal(), Signal(index_bits(self._t))
        s1_row, s1_place = Signal(range(self._t * rows)), Signal(max(1, place_bits))
        s1_closes = Signal()               # the candidate's last beat: the slot holds a sum now
        s1_weighted = [Signal(signed(Q16_WIDTH), name=f"weighted_{p}")
                       for p in range(y_values)]
        m.d.sync += s1_valid.eq(0)
        with m.If(s1_valid):
            old = rd.data.as_value().word_select(s1_place, y_values * Q16_WIDTH) if place_bits \
                else rd.data.as_value()
            new = []
            for p in range(y_values):
                was = Mux(empty.bit_select(s1_slot, 1), 0,
                          old[p * Q16_WIDTH:(p + 1) * Q16_WIDTH])
                new.append((was.as_signed() + s1_weighted[p])[:Q16_WIDTH])
            m.d.comb += [wr.addr.eq(s1_row),
                         wr.data.eq(Cat(*new).replicate(beats_per_row)),
                         wr.en.eq(((1 << y_values) - 1) << (s1_place * y_values) if place_bits
                                   else (1 << y_values) - 1)]
            with m.If(s1_closes):
                m.d.sync += empty.bit_select(s1_slot, 1).eq(0)
        with m.FSM(name="phase"):
            with m.State("Combine"):
                item = self.y.payload
                take = self.y.valid & ~self.flush.valid
                m.d.comb += [self.y.ready.eq(~self.flush.valid),
                             self.group_done.eq(take & item.last),
                             self.flush.ready.eq(~s1_valid)]
                slot = self.token[item.candidate]
                row = slot * rows + (item.index >> place_bits)
                start = self.flush.valid & ~s1_valid
                # the beat's row, read as it is taken, is there for its add the cycle after; a
                # flush's first row likewise, for its first beat
                m.d.comb += [rd.addr.eq(Mux(start, self.flush.payload.token * rows, row)),
                             rd.en.eq(take | start)]
                with m.If(take):
                    m.d.sync += [s1_valid.eq(1), s1_slot.eq(slot),
                                 s1_row.eq(row),
                                 s1_closes.eq(item.index == d_model // y_values - 1)]
                    if place_bits:
                        m.d.sync += s1_place.eq(item.index[:place_bits])
                    for p in range(y_values):
                        weighted = (item.value[p] * self.weight[item.candidate] + (1 << 15)) >> 16
                        m.d.sync += s1_weighted[p].eq(weighted)
                with m.If(start):
                    m.d.sync += [token.eq(self.flush.payload.token), beat.eq(0)]
                    m.next = "Flush"
            with m.State("Flush"):
                final = beat == rows - 1
                # the last row's places beyond D were never written: they leave as 0
                beyond = [final if (rows - 1) * per + i >= d_model else 0 for i in range(per)]
                # the row after this one is read as this one leaves
                m.d.comb += [rd.addr.eq(token * rows + beat + 1),
                             rd.en.eq(self.moe_out.ready & ~final),
                             self.moe_out.valid.eq(1),
                             self.moe_out.payload.token.eq(token),
                             self.moe_out.payload.beat.eq(beat),
                             self.moe_out.payload.last.eq(final)]
                m.d.comb += [self.moe_out.payload.values[i].eq(
                                 Mux(empty.bit_select(token, 1) | out_of_range, 0, rd.data[i]))
                             for i, out_of_range in enumerate(beyond)]
                with m.If(self.moe_out.ready):
                    m.d.sync += beat.eq(beat + 1)
                    with m.If(final):
                        m.d.sync += empty.bit_select(token, 1).eq(1)
                        m.next = "Combine"
        return m
