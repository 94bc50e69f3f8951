"""The expert engine: one expert for a group of candidates, GATE_UP to the weighted MoE sum."""

from __future__ import annotations

from amaranth.hdl import Module, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from ...contracts.top import EXPERT_OUT_VALUES, inputs_per_beat, outputs_per_beat
from .broadcast import Broadcast
from .column_mac import ColumnMac
from .combine import Combine
from ..streams import StreamFIFO
from .layouts import (act_layout, cand_layout, check_positive, check_word, column_layout,
                      flush_layout, hidden_scale_layout, index_bits, mask_layout, moe_layout,
                      scale_words_layout, sum_layout, x_layout)
from .quantizer import Quantizer
from .requant import Requant
from .swiglu import SwiGlu

__all__ = ["ExpertEngine"]

#: groups whose x scales are held: the one whose GATE_UP drains, the one in the GATE_UP MAC and
#: the one loading meanwhile (hw/engine/column_mac.py: two input banks, the sums held apart)
X_QUEUE = 3
#: groups whose token slots and weights are held, candidates to combine: the one combining (the
#: DOWN drain), the one in the DOWN MAC, the one draining its GATE_UP into the quantizer (and the
#: DOWN inputs), the one in the GATE_UP MAC and the one loading
GROUP_QUEUE = 5
#: groups whose hidden scales are held, from their last DOWN input to their last DOWN sum: the
#: DOWN array holds up to five (the one whose last sum waits to be taken, the one draining or
#: waiting to drain, the one whose MAC ended and waits to hand its sums over (its input bank
#: free again) and one in each input bank), and nothing stops its inputs when this queue is
#: full, so it holds as many as the engine takes (GROUP_QUEUE; three, before issue 28, dropped
#: the fourth group's record when a drain outlasted the next group's DOWN MAC (four candidates
#: behind one, or slow outputs), and that group was requantized with the previous one's scale)
H_QUEUE = GROUP_QUEUE
#: a flush's ticket counts groups modulo 2**TICKET_BITS: at most GROUP_QUEUE are taken and not
#: yet combined, so equal tickets are unambiguous
TICKET_BITS = GROUP_QUEUE.bit_length() + 1


def _queue(m: Module, name: str, shape, depth: int, push, value, pop):
    """A first-in first-out queue of `depth` registers: `value` enters when `push`, the head
    leaves when `pop` (the caller never pushes a full queue nor pops an empty one). Returns the
    head, full and empty."""
    slots = [Signal(shape, name=f"{name}_{i}") for i in range(depth)]
    used = Signal(range(depth + 1), name=f"{name}_used")
    m.d.sync += used.eq(used + push - pop)
    for i, slot in enumerate(slots):
        behind = slots[i + 1] if i + 1 < depth else slot
        with m.If(pop):
            m.d.sync += slot.eq(behind)
            with m.If(push & (used == i + 1)):
                m.d.sync += slot.eq(value)
        with m.Elif(push & (used == i)):
            m.d.sync += slot.eq(value)
    return slots[0], used == depth, used == 0


class ExpertEngine(wiring.Component):
    """SwiGLU experts on int8 candidates, bit-exact to docs/contracts.md (mixture of experts).

    Parameters: `d_model` (D) and `expert_ffn` (F) of the model; `candidates` (C), the most
    candidates of one group; `lanes`, int4 products per cycle of each MAC array; `word_bits`, the
    weight buffer's word (the EMA's AXI data width); `tokens`, token slots of the MoE sums.

    A group (1..C candidates that chose one expert) goes through, in order:
    `cand` (per candidate: x scale, token slot, routing weight; `last` on the group's last) ->
    `x` (the candidates' int8 inputs, a beat of word_bits / 8 of one candidate per cycle, any
    order, `last` on the last; edgexpert.contracts.top.input_beats) -> GATE_UP MAC over the
    `gate_up` columns -> requantization with the `gate_up_scales` block -> SiLU(gate) * up ->
    quantize_vec (`hidden`, `hidden_scale`) -> DOWN MAC over the `down` columns ->
    requantization with `down_scales` -> `expert_out` -> the weighted sum in the token's slot.
    `flush` reads a token's MoE output out on `moe_out` and clears the slot.

    Each candidate's channel masks come on `gate_up_mask` (input channels) and `down_mask`
    (hidden channels), one item per candidate in the order of `cand`, `last` on the group's
    last: a column outside a candidate's mask adds nothing to its sums (docs/contracts.md,
    "Candidates of several depth groups in one engine group"), so candidates of one group may
    each take their own subset of the columns the group walks. A matrix's MAC starts on a
    group's columns once the group's masks for it are in; they may come any time before, so a
    mask decided late (the DCU's, from the group's own hidden vectors) holds only that MAC.

    Groups overlap (up to five in flight): `cand` is taken once the previous group's inputs
    are all in and the group three before has finished its GATE_UP requantization (and the
    group five before is combined), so a group's inputs load while the previous group's GATE_UP
    MAC runs, and its GATE_UP MAC while the previous group's GATE_UP drains; the DOWN array
    the same, one group behind. `x` is taken only for the newest group. A `flush`
    is queued (up to `tokens` of them) with a ticket, the count of groups taken before it: it
    reads its slot out once exactly those groups are combined, ahead of any later group's
    outputs, so a batch's flushes need not wait and the next batch's groups start behind them
    (a flush taken in the cycle a group's last candidate is, comes before that group). Column
    and scale streams may run ahead: each part takes them when it reaches that phase. `hidden` and `expert_out` are copies of what the DOWN MAC
    and the combine consume (both must be taken).
    """

    def __init__(self, d_model: int, expert_ffn: int, candidates: int, lanes: int,
                 word_bits: int, tokens: int):
        check_positive("d_model", d_model)
        check_positive("expert_ffn", expert_ffn)
        if d_model % EXPERT_OUT_VALUES:
            raise TypeError(f"d_model must be a multiple of {EXPERT_OUT_VALUES} (the DOWN drain "
                            f"gives {EXPERT_OUT_VALUES} outputs a cycle), not {d_model!r}")
        check_positive("candidates", candidates, 1, 64)
        check_positive("tokens", tokens, 1, 4096)
        check_word(lanes, word_bits)
        self._d, self._f, self._c = d_model, expert_ffn, candidates
        self._p, self._w, self._t = lanes, word_bits, tokens
        super().__init__({
            "cand": In(stream.Signature(cand_layout(tokens))),
            "gate_up_mask": In(stream.Signature(mask_layout(d_model))),
            "down_mask": In(stream.Signature(mask_layout(expert_ffn))),
            "x": In(stream.Signature(x_layout(candidates, d_model, inputs_per_beat(word_bits)))),
            "gate_up": In(stream.Signature(column_layout(d_model, word_bits))),
            "gate_up_scales": In(stream.Signature(scale_words_layout(word_bits))),
            "down": In(stream.Signature(column_layout(expert_ffn, word_bits))),
            "down_scales": In(stream.Signature(scale_words_layout(word_bits))),
            "flush": In(stream.Signature(flush_layout(tokens))),
            "hidden": Out(stream.Signature(act_layout(candidates, expert_ffn))),
            "hidden_scale": Out(stream.Signature(hidden_scale_layout(candidates))),
            "expert_out": Out(stream.Signature(sum_layout(candidates, d_model,
                                                          EXPERT_OUT_VALUES))),
            "moe_out": Out(stream.Signature(moe_layout(tokens, d_model,
                                                       outputs_per_beat(word_bits)))),
        })

    @property
    def parameters(self) -> dict:
        return {"d_model": self._d, "expert_ffn": self._f, "candidates": self._c,
                "lanes": self._p, "word_bits": self._w, "tokens": self._t}

    def elaborate(self, platform):
        m = Module()
        d, f, c, w = self._d, self._f, self._c, self._w
        # GATE_UP drains gate f and up f side by side (parts = 2): F cycles per candidate
        m.submodules.gate_up_mac = gu_mac = ColumnMac(d, 2 * f, c, self._p, w, inputs_per_beat(w),
                                                      parts=2, masked=True)
        m.submodules.gate_up_requant = gu_rq = Requant(c, 2 * f, w, parts=2)
        m.submodules.swiglu = swiglu = SwiGlu(c, f)
        m.submodules.quantizer = quant = Quantizer(c, f)
        m.submodules.hidden_copy = hidden_copy = Broadcast(act_layout(c, f))
        # the DOWN MAC's inputs come from the quantizer, one value per cycle: beats of one value;
        # it drains outputs 4j .. 4j + 3 together, D / 4 cycles per candidate, into a combine
        # that adds them in one row of its memory
        beat = EXPERT_OUT_VALUES
        m.submodules.down_mac = dn_mac = ColumnMac(f, d, c, self._p, w, 1, parts=beat,
                                                   split="neighbours", early=True, masked=True)
        m.submodules.down_requant = dn_rq = Requant(c, d, w, parts=beat, split="neighbours")
        m.submodules.out_copy = out_copy = Broadcast(sum_layout(c, d, beat))
        m.submodules.combine = comb = Combine(c, d, self._t, outputs_per_beat(w))

        connect = wiring.connect
        connect(m, wiring.flipped(self.gate_up_scales), gu_rq.scales)
        connect(m, gu_mac.sums, gu_rq.i_sums)
        connect(m, gu_rq.o_sums, swiglu.sums)
        connect(m, swiglu.h, quant.h)
        connect(m, quant.hidden, hidden_copy.i_stream)
        connect(m, hidden_copy.o_b, wiring.flipped(self.hidden))
        connect(m, quant.scale, wiring.flipped(self.hidden_scale))
        connect(m, wiring.flipped(self.down_scales), dn_rq.scales)
        connect(m, dn_mac.sums, dn_rq.i_sums)
        connect(m, dn_rq.o_sums, out_copy.i_stream)
        connect(m, out_copy.o_a, comb.y)
        connect(m, out_copy.o_b, wiring.flipped(self.expert_out))
        connect(m, comb.moe_out, wiring.flipped(self.moe_out))

        # Groups overlap: each MAC array loads one group's inputs, multiplies the one before and
        # drains the one before that at once (hw/engine/column_mac.py), and the DOWN array runs
        # a group behind the GATE_UP one. Each stage reads its group's record from the head of
        # its own queue, filled in group order and emptied as the stage's last item of the
        # group passes: the x scales (GATE_UP requantization: the group loading, the one
        # multiplying and the one draining), the token slots and weights (the combine: every
        # group from its candidates to its last combined output) and the hidden scales (DOWN
        # requantization; the quantizer's copy changes as soon as it starts the next group)
        def last_of(port):
            return port.valid & port.ready & port.payload.last

        # the group's record: each CAND field (but `last`) of every candidate
        fields = ("x", "token", "weight")
        cand_fields = self.cand.payload.shape()
        record_layout = data.StructLayout({name: data.ArrayLayout(cand_fields[name].shape, c)
                                           for name in fields})
        item = self.cand.payload
        now, pushed = _gather(m, "cand", self.cand, record_layout, c,
                              lambda now, i: [now[name][i].eq(item[name]) for name in fields])
        x_open = Signal()
        with m.If(pushed):
            m.d.sync += x_open.eq(1)
        with m.If(last_of(self.x)):
            m.d.sync += x_open.eq(0)

        x_head, x_full, _ = _queue(m, "x_scales", now.x.shape(), X_QUEUE, pushed, now.x,
                                   last_of(gu_mac.sums))
        # the token slots and weights, both the combine's until the group is combined
        slots_layout = data.StructLayout({"token": record_layout["token"].shape,
                                          "weight": record_layout["weight"].shape})
        slots_now = Signal(slots_layout)
        m.d.comb += [slots_now.token.eq(now.token), slots_now.weight.eq(now.weight)]
        c_head, t_full, _ = _queue(m, "slots", slots_layout, GROUP_QUEUE, pushed, slots_now,
                                   comb.group_done)
        h_head, _, _ = _queue(m, "hidden_scales", quant.scales.shape(), H_QUEUE,
                              last_of(dn_mac.act), quant.scales, last_of(dn_mac.sums))
        # each candidate's masks, a group's record per matrix from its last mask item until its
        # MAC's last column: the GATE_UP array's group is never more than X_QUEUE groups behind
        # the newest candidates, the DOWN array's never more than GROUP_QUEUE, so a mask sent
        # with its candidate never waits for room
        for name, port, columns, mac, depth in (
                ("gate_up_mask", self.gate_up_mask, self.gate_up, gu_mac, X_QUEUE),
                ("down_mask", self.down_mask, self.down, dn_mac, GROUP_QUEUE)):
            _masked_columns(m, f"{name}s", port, columns, mac, depth, c)
        m.d.comb += [gu_rq.act_scale.eq(x_head), dn_rq.act_scale.eq(h_head),
                     comb.token.eq(c_head.token), comb.weight.eq(c_head.weight)]
        # a new group once the previous one's inputs are in and both queues have room
        m.d.comb += self.cand.ready.eq(~x_open & ~x_full & ~t_full)
        # a flush waits in its queue for the groups taken before it (its ticket), and no longer:
        # the groups behind it go on, and the combine reads the slot out before their outputs
        taken = Signal(TICKET_BITS)
        combined = Signal(TICKET_BITS)
        m.d.sync += [taken.eq(taken + pushed), combined.eq(combined + comb.group_done)]
        ticket_layout = data.StructLayout({"token": flush_layout(self._t),
                                           "ticket": TICKET_BITS})
        m.submodules.flushes = flushes = StreamFIFO(ticket_layout, self._t)
        due = flushes.r.payload.ticket == combined
        m.d.comb += [flushes.w.valid.eq(self.flush.valid),
                     flushes.w.payload.token.eq(self.flush.payload),
                     flushes.w.payload.ticket.eq(taken),
                     self.flush.ready.eq(flushes.w.ready),
                     comb.flush.valid.eq(flushes.r.valid & due),
                     comb.flush.payload.eq(flushes.r.payload.token),
                     flushes.r.ready.eq(comb.flush.ready & due)]
        hidden = hidden_copy.o_a.payload
        m.d.comb += [dn_mac.act.valid.eq(hidden_copy.o_a.valid),
                     dn_mac.act.payload.candidate.eq(hidden.candidate),
                     dn_mac.act.payload.beat.eq(hidden.channel),
                     dn_mac.act.payload.values[0].eq(hidden.value),
                     dn_mac.act.payload.last.eq(hidden.last),
                     dn_mac.act_final.eq(quant.hidden_final),
                     hidden_copy.o_a.ready.eq(dn_mac.act.ready)]
        m.d.comb += [gu_mac.act.valid.eq(self.x.valid & x_open),
                     gu_mac.act.payload.eq(self.x.payload),
                     self.x.ready.eq(gu_mac.act.ready & x_open)]
        return m


def _gather(m: Module, name: str, port, record_layout, candidates: int, place):
    """A record per group from `port`'s items, one per candidate (`last` on the group's last,
    or its `candidates`-th): `place(now, i)` gives the statements writing the item into
    candidate i's place. Returns `now`, the record with this cycle's item written over it, and
    `pushed`, high when the group's last item is taken (`now` is then the whole record)."""
    record = Signal(record_layout, name=f"{name}_record")
    count = Signal(index_bits(candidates), name=f"{name}_count")
    now = Signal(record_layout, name=f"{name}_now")
    m.d.comb += now.eq(record)
    take = port.valid & port.ready
    with m.If(take):
        m.d.comb += place(now, count)
        m.d.sync += [record.eq(now), count.eq(count + 1)]
    pushed = take & (port.payload.last | (count == candidates - 1))
    with m.If(pushed):
        m.d.sync += count.eq(0)
    return now, pushed


def _masked_columns(m: Module, name: str, masks, columns, mac, depth: int, candidates: int):
    """`masks` (one item per candidate, `last` on its group's last) gathered into a record per
    group and queued (`depth` groups), the head on `mac.act_mask`; `columns` to `mac` only while
    a record is queued (the MAC's group is the oldest one there), the head leaving with the
    group's last column."""
    mask = masks.payload.mask
    record_layout = data.ArrayLayout(mask.shape(), candidates)
    now, pushed = _gather(m, name, masks, record_layout, candidates,
                          lambda now, i: now[i].eq(mask))
    ended = mac.columns.valid & mac.columns.ready & mac.columns.payload.last
    head, full, empty = _queue(m, name, record_layout, depth, pushed, now, ended)
    m.d.comb += [masks.ready.eq(~full), mac.act_mask.eq(head),
                 mac.columns.valid.eq(columns.valid & ~empty),
                 mac.columns.payload.eq(columns.payload),
                 columns.ready.eq(mac.columns.ready & ~empty)]
