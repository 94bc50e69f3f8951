"""Stage 4: the routing weights. `softmax_q16` over a token's chosen logits (docs/contracts.md,
attention step 5), from an exp2 table and a restoring divider."""

from __future__ import annotations

import math

from amaranth.hdl import Array, Cat, Const, Module, Mux, Signal, signed, unsigned
from amaranth.lib import stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from ...contracts.pru import LOGIT_BITS, WEIGHT_BITS, TokenClass
from .params import PruParams, bits_for

__all__ = ["Renormalizer", "EXP2_TABLE", "LOG2E_Q16"]

#: the contract's table (docs/contracts.md, attention step 5): EXP2[f] = round(2^15 2^(-f/1024))
EXP2_TABLE = [round(32768 * 2 ** (-f / 1024)) for f in range(1024)]
#: log2(e) in Q.16 (the same step)
LOG2E_Q16 = round(math.log2(math.e) * 65536)
#: exp(x) of the largest chosen logit is EXP2[0] = 2^15
EXP_BITS = 16


class Renormalizer(wiring.Component):
    """Takes a token's picks (top-1 first: its logit is the largest chosen one), turns each into
    ex = EXP2[f] >> n (rounded) as it arrives, and adds them into S. After the token's last
    pick, every weight floor((ex 2^16 + floor(S/2)) / S) at once, by top_k restoring dividers
    of two quotient bits per cycle ((WEIGHT_BITS + 1) / 2 cycles); the weights then leave through
    `route` in pick order, one per cycle (a register, held until taken). Picks are not taken
    meanwhile: a token of j picks occupies the stage 2 j + 3 + (WEIGHT_BITS + 1) / 2 cycles
    (j taking picks, 2 draining the exponent's pipeline, 1 preparing the numerators, then
    dividing, then j leaving)."""
    def __init__(self, params: PruParams):
        self._p = params
        super().__init__({"pick": In(stream.Signature(params.pick_layout)),
                          "route": Out(stream.Signature(params.route_layout))})

    def elaborate(self, platform):
        m = Module()
        p, i, o = self._p, self.pick, self.route
        k = p.top_k
        sum_bits = EXP_BITS + bits_for(k)
        m.submodules.exp2 = table = Memory(shape=unsigned(EXP_BITS), depth=len(EXP2_TABLE),
                                           init=EXP2_TABLE)
        lookup = table.read_port(domain="comb")

        exps = Array(Signal(EXP_BITS, name=f"exp_{j}", reset_less=True) for j in range(k))
        experts = Array(Signal(p.expert_bits, name=f"expert_{j}", reset_less=True)
                        for j in range(k))
        cls = Signal(TokenClass, reset_less=True)
        count = Signal(p.pick_bits)         # picks of the token so far
        top = Signal(signed(LOGIT_BITS), reset_less=True)
        total = Signal(sum_bits, reset_less=True)     # the first pick of a token sets it

        # stage 1 (the pick's cycle): x = z - z_top <= 0, registered; stage 2: -y =
        # -rshift(x log2(e), 16) >= 0 is -x log2(e) in Q.16, registered (the 33 x 17-bit
        # product; with the subtraction in front of it, pru_e128's critical path); stage 3:
        # ex = EXP2[f] >> n, rounded, into the token's slot and the sum
        accepted = Signal(p.pick_bits)      # picks of the token taken into stage 1
        differenced, differenced_last = Signal(), Signal()     # stage 2 holds a pick
        staged = Signal()                                      # stage 3 holds a pick
        staged_last = Signal()
        x = Mux(accepted == 0, 0, i.payload.logit - top)
        difference = Signal(signed(LOGIT_BITS + 1), reset_less=True)
        neg_y = Signal(LOGIT_BITS + 2, reset_less=True)
        n = neg_y[16:]
        m.d.comb += lookup.addr.eq(neg_y[6:16])
        shift = n[:5]
        rounded = (lookup.data + (Const(1, 1) << shift >> 1)) >> shift
        ex = Mux(n < 17, rounded, 0)

        # one divider per pick slot, two quotient bits per cycle: numerator >> WEIGHT_BITS < S
        # (the quotient has WEIGHT_BITS bits), so the first cycle loads those high bits and
        # takes the top quotient bit; (WEIGHT_BITS - 1) / 2 cycles take the rest. The
        # numerators are registered a cycle before (Prepare): their adder ahead of two
        # compare-and-subtract steps was pru_e128's critical path (docs/blocks/pru.md)
        bit = Signal(range(WEIGHT_BITS))    # the next quotient bit (the higher of a pair)
        item = Signal(p.pick_bits)          # the weight leaving
        # loaded before use (Prepare, the first Divide cycle): no reset
        numerators = [Signal(EXP_BITS + 16 + 1, name=f"numerator_{j}", reset_less=True)
                      for j in range(k)]
        remainders = [Signal(sum_bits, name=f"remainder_{j}", reset_less=True) for j in range(k)]
        quotients = [Signal(WEIGHT_BITS, name=f"quotient_{j}", reset_less=True) for j in range(k)]
        steps = []
        for j in range(k):
            numerator = numerators[j]
            first = Cat(numerator[WEIGHT_BITS - 1], numerator >> WEIGHT_BITS)
            first_fits = first >= total
            trial_hi = Cat(numerator.bit_select(bit, 1), remainders[j])
            fits_hi = trial_hi >= total
            rest_hi = Mux(fits_hi, trial_hi - total, trial_hi)
            trial_lo = Cat(numerator.bit_select((bit - 1).as_unsigned(), 1), rest_hi)
            fits_lo = trial_lo >= total
            steps.append((Mux(first_fits, first - total, first), first_fits,
                          Mux(fits_lo, trial_lo - total, trial_lo),
                          Cat(fits_lo, fits_hi)))

        with m.If(o.ready):
            m.d.sync += o.valid.eq(0)
        with m.FSM(name="fsm"):
            with m.State("Take-Picks"):
                m.d.comb += i.ready.eq(~(differenced & differenced_last) & ~(staged & staged_last))
                m.d.sync += [differenced.eq(0), staged.eq(differenced)]
                with m.If(i.valid & i.ready):
                    m.d.sync += [difference.eq(x),
                                 experts[accepted].eq(i.payload.expert), cls.eq(i.payload.cls),
                                 accepted.eq(accepted + 1), differenced.eq(1),
                                 differenced_last.eq(i.payload.last)]
                    with m.If(accepted == 0):
                        m.d.sync += top.eq(i.payload.logit)
                with m.If(differenced):
                    m.d.sync += [neg_y.eq(-((difference * LOG2E_Q16 + (1 << 15)) >> 16)),
                                 staged_last.eq(differenced_last)]
                with m.If(staged):
                    m.d.sync += [exps[count].eq(ex), count.eq(count + 1),
                                 total.eq(Mux(count == 0, ex, total + ex))]
                    with m.If(staged_last):
                        m.d.sync += [bit.eq(WEIGHT_BITS - 1), accepted.eq(0), staged_last.eq(0)]
                        m.next = "Prepare"
            with m.State("Prepare"):
                # ex 2^16 + floor(S/2)
                m.d.sync += [numerators[j].eq((exps[j] << 16) + (total >> 1)) for j in range(k)]
                m.next = "Divide"
            with m.State("Divide"):
                with m.If(bit == WEIGHT_BITS - 1):
                    for j, (rem, fits, _, _) in enumerate(steps):
                        m.d.sync += [remainders[j].eq(rem),
                                     quotients[j].eq(fits.as_unsigned() << (WEIGHT_BITS - 1))]
                with m.Else():
                    for j, (_, _, rem, pair) in enumerate(steps):
                        m.d.sync += [remainders[j].eq(rem),
                                     quotients[j].eq(quotients[j] | (pair << (bit - 1).as_unsigned()))]
                m.d.sync += bit.eq(bit - Mux(bit == WEIGHT_BITS - 1, 1, 2))
                with m.If(bit == 1):
                    m.d.sync += item.eq(0)
                    m.next = "Emit"
            with m.State("Emit"):
                with m.If(~o.valid | o.ready):
                    last = item + 1 == count
                    m.d.sync += [o.valid.eq(1), o.payload.cls.eq(cls),
                                 o.payload.expert.eq(experts[item]),
                                 o.payload.weight.eq(Array(quotients)[item]),
                                 o.payload.last.eq(last), item.eq(item + 1)]
                    with m.If(last):
                        m.d.sync += count.eq(0)
                        m.next = "Take-Picks"
        return m
