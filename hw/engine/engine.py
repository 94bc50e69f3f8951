"""The expert engine: one expert for a group of candidates, GATE_UP to the weighted MoE sum."""

from __future__ import annotations

from amaranth.hdl import Module, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from .broadcast import Broadcast
from .column_mac import ColumnMac
from .combine import Combine
from .layouts import (WEIGHT_BITS, act_layout, cand_layout, check_positive, check_word,
                      column_layout, dyadic_layout, flush_layout, hidden_scale_layout, index_bits,
                      moe_layout, scale_words_layout, sum_layout)
from .quantizer import Quantizer
from .requant import Requant
from .swiglu import SwiGlu

__all__ = ["ExpertEngine"]


class ExpertEngine(wiring.Component):
    """SwiGLU experts on int8 candidates, bit-exact to docs/contracts.md (mixture of experts).

    Parameters: `d_model` (D) and `expert_ffn` (F) of the model; `candidates` (C), the most
    candidates of one group; `lanes`, int4 products per cycle of each MAC array; `word_bits`, the
    weight buffer's word (the EMA's AXI data width); `tokens`, token slots of the MoE sums.

    A group (1..C candidates that chose one expert) goes through, in order:
    `cand` (per candidate: x scale, token slot, routing weight; `last` on the group's last) ->
    `x` (the candidates' int8 inputs, any order, `last` on the last) -> GATE_UP MAC over the
    `gate_up` columns -> requantization with the `gate_up_scales` block -> SiLU(gate) * up ->
    quantize_vec (`hidden`, `hidden_scale`) -> DOWN MAC over the `down` columns ->
    requantization with `down_scales` -> `expert_out` -> the weighted sum in the token's slot.
    `flush` reads a token's MoE output out on `moe_out` and clears the slot.

    Two groups are in flight at once: `cand` is taken once the group before has finished its
    GATE_UP requantization and handed its token slots and weights to the back stage (which the
    group before it must have left by being combined), so a group's inputs and GATE_UP MAC run
    while the previous group's DOWN MAC and drain do. `x` is taken only for the newest group, and
    `flush` only when no group is in flight. Column and scale streams may run ahead: each part
    takes them when it reaches that phase. `hidden` and `expert_out` are copies of what the DOWN
    MAC and the combine consume (both must be taken).
    """

    def __init__(self, d_model: int, expert_ffn: int, candidates: int, lanes: int,
                 word_bits: int, tokens: int):
        check_positive("d_model", d_model)
        check_positive("expert_ffn", expert_ffn)
        check_positive("candidates", candidates, 1, 64)
        check_positive("tokens", tokens, 1, 4096)
        check_word(lanes, word_bits)
        self._d, self._f, self._c = d_model, expert_ffn, candidates
        self._p, self._w, self._t = lanes, word_bits, tokens
        super().__init__({
            "cand": In(stream.Signature(cand_layout(tokens))),
            "x": In(stream.Signature(act_layout(candidates, d_model))),
            "gate_up": In(stream.Signature(column_layout(d_model, word_bits))),
            "gate_up_scales": In(stream.Signature(scale_words_layout(word_bits))),
            "down": In(stream.Signature(column_layout(expert_ffn, word_bits))),
            "down_scales": In(stream.Signature(scale_words_layout(word_bits))),
            "flush": In(stream.Signature(flush_layout(tokens))),
            "hidden": Out(stream.Signature(act_layout(candidates, expert_ffn))),
            "hidden_scale": Out(stream.Signature(hidden_scale_layout(candidates))),
            "expert_out": Out(stream.Signature(sum_layout(candidates, d_model))),
            "moe_out": Out(stream.Signature(moe_layout(tokens, d_model))),
        })

    @property
    def parameters(self) -> dict:
        return {"d_model": self._d, "expert_ffn": self._f, "candidates": self._c,
                "lanes": self._p, "word_bits": self._w, "tokens": self._t}

    def elaborate(self, platform):
        m = Module()
        d, f, c, w = self._d, self._f, self._c, self._w
        m.submodules.gate_up_mac = gu_mac = ColumnMac(d, 2 * f, c, self._p, w)
        m.submodules.gate_up_requant = gu_rq = Requant(c, 2 * f, w)
        m.submodules.swiglu = swiglu = SwiGlu(c, f)
        m.submodules.quantizer = quant = Quantizer(c, f)
        m.submodules.hidden_copy = hidden_copy = Broadcast(act_layout(c, f))
        m.submodules.down_mac = dn_mac = ColumnMac(f, d, c, self._p, w)
        m.submodules.down_requant = dn_rq = Requant(c, d, w)
        m.submodules.out_copy = out_copy = Broadcast(sum_layout(c, d))
        m.submodules.combine = comb = Combine(c, d, self._t)

        connect = wiring.connect
        connect(m, wiring.flipped(self.gate_up), gu_mac.columns)
        connect(m, wiring.flipped(self.gate_up_scales), gu_rq.scales)
        connect(m, gu_mac.sums, gu_rq.sums)
        connect(m, gu_rq.out, swiglu.i)
        connect(m, swiglu.o, quant.h)
        connect(m, quant.hidden, hidden_copy.i)
        connect(m, hidden_copy.a, dn_mac.act)
        connect(m, hidden_copy.b, wiring.flipped(self.hidden))
        connect(m, quant.scale, wiring.flipped(self.hidden_scale))
        connect(m, wiring.flipped(self.down), dn_mac.columns)
        connect(m, wiring.flipped(self.down_scales), dn_rq.scales)
        connect(m, dn_mac.sums, dn_rq.sums)
        connect(m, dn_rq.out, out_copy.i)
        connect(m, out_copy.b, wiring.flipped(self.expert_out))
        connect(m, comb.moe_out, wiring.flipped(self.moe_out))

        # Two groups in flight: the front one (candidates, inputs, GATE_UP MAC and its
        # requantization) and the back one (from the hand-over to its last combined output), so
        # the next group's GATE_UP runs while this one's DOWN does. Each stage holds its own copy
        # of what it reads: the front the x scales (GATE_UP requantization), the back the token
        # slots and weights (the combine) and the hidden scales (DOWN requantization; the
        # quantizer's own copy changes as soon as it starts the next group).
        x_scale = Signal(data.ArrayLayout(dyadic_layout, c))
        token = Signal(data.ArrayLayout(index_bits(self._t), c))
        weight = Signal(data.ArrayLayout(WEIGHT_BITS, c))
        back_token = Signal.like(token)
        back_weight = Signal.like(weight)
        hidden_scale = Signal(data.ArrayLayout(dyadic_layout, c))
        m.d.comb += [gu_rq.act_scale.eq(x_scale), dn_rq.act_scale.eq(hidden_scale),
                     comb.token.eq(back_token), comb.weight.eq(back_weight)]

        def last_of(port):
            return port.valid & port.ready & port.payload.last

        # the DOWN MAC's last input: the quantizer has emitted every scale of the group, and the
        # DOWN requantization of the group before it has taken its last sum (the MAC array
        # drains one group before it loads the next)
        with m.If(last_of(dn_mac.act)):
            m.d.sync += hidden_scale.eq(quant.scales)

        count = Signal(index_bits(c))
        x_open = Signal()
        front = Signal()         # a group's candidates are in; it holds x_scale, token, weight
        front_summed = Signal()  # ... and its GATE_UP requantization took its last sum
        back = Signal()          # a group holds back_token and back_weight until it is combined
        m.d.comb += self.cand.ready.eq(~front)
        with m.If(self.cand.valid & self.cand.ready):
            item = self.cand.payload
            m.d.sync += [x_scale[count].eq(item.x), token[count].eq(item.token),
                         weight[count].eq(item.weight), count.eq(count + 1)]
            with m.If(item.last | (count == c - 1)):
                m.d.sync += [count.eq(0), x_open.eq(1), front.eq(1)]
        with m.If(last_of(gu_mac.sums)):
            m.d.sync += front_summed.eq(1)
        with m.If(comb.group_done):
            m.d.sync += back.eq(0)
        with m.If(front & front_summed & (~back | comb.group_done)):
            m.d.sync += [back_token.eq(token), back_weight.eq(weight), back.eq(1),
                         front.eq(0), front_summed.eq(0)]
        # the combine takes a group's outputs only once that group holds the back registers
        m.d.comb += [comb.y.valid.eq(out_copy.a.valid & back),
                     comb.y.payload.eq(out_copy.a.payload),
                     out_copy.a.ready.eq(comb.y.ready & back)]
        # a flush only between groups: no group's sums may still be coming
        idle = ~front & ~back
        m.d.comb += [comb.flush.valid.eq(self.flush.valid & idle),
                     comb.flush.payload.eq(self.flush.payload),
                     self.flush.ready.eq(comb.flush.ready & idle)]
        m.d.comb += [gu_mac.act.valid.eq(self.x.valid & x_open),
                     gu_mac.act.payload.eq(self.x.payload),
                     self.x.ready.eq(gu_mac.act.ready & x_open)]
        with m.If(self.x.valid & self.x.ready & self.x.payload.last):
            m.d.sync += x_open.eq(0)
        return m
