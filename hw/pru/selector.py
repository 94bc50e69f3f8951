"""Stage 3: the selector. A token's router logits in, its picks out, the shared set S kept."""

from __future__ import annotations

from amaranth.hdl import Cat, Const, Module, Mux, Signal, Value, signed
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from ...contracts.pru import LOGIT_BITS, TokenClass
from .params import PruParams

__all__ = ["Selector", "max_tree"]


def max_tree(m: Module, entries: list[tuple[Value, Value]],
             register_after: int = 0) -> tuple[Signal, Signal, Signal]:
    """(valid, key, index) of the largest valid key among `entries` (valid, key) in index order,
    by a tree of 2-input comparisons: len(entries) - 1 comparators, ceil(log2(len)) deep. The left
    input wins ties, so equal keys go to the lower index. Every node is a signal of its own.
    `register_after` > 0: the nodes of that level are registers (sampled every cycle, so
    without reset), so the result is that of the entries one cycle earlier and the tree's delay
    is split in two."""
    width = len(Value.cast(entries[0][1]))
    level = [(v, k, Const(i, range(len(entries)))) for i, (v, k) in enumerate(entries)]
    depth = 0
    while len(level) > 1:
        paired = []
        depth += 1
        domain = m.d.sync if depth == register_after else m.d.comb
        registered = depth == register_after
        for n, (a, b) in enumerate(zip(level[0::2], level[1::2])):
            valid = Signal(name=f"max_{depth}_{n}_valid", reset_less=registered)
            key = Signal(width, name=f"max_{depth}_{n}_key", reset_less=registered)
            index = Signal(range(len(entries)), name=f"max_{depth}_{n}_index",
                           reset_less=registered)
            left = a[0] & (~b[0] | (a[1] >= b[1]))
            domain += [valid.eq(a[0] | b[0]), key.eq(Mux(left, a[1], b[1])),
                       index.eq(Mux(left, a[2], b[2]))]
            paired.append((valid, key, index))
        if len(level) % 2:
            if registered:   # the odd node crosses the register with the others
                valid = Signal(name=f"max_{depth}_odd_valid", reset_less=True)
                key = Signal(width, name=f"max_{depth}_odd_key", reset_less=True)
                index = Signal(range(len(entries)), name=f"max_{depth}_odd_index", reset_less=True)
                domain += [valid.eq(level[-1][0]), key.eq(level[-1][1]), index.eq(level[-1][2])]
                paired.append((valid, key, index))
            else:
                paired.append(level[-1])
        level = paired
    return level[0]


class Selector(wiring.Component):
    """Per job: the token's `n_experts` logits (`lanes` per beat, in expert order) into a
    register file, then `job.picks` picks, each the largest key among the experts not
    picked yet (`max_tree`). The key is the logit, except for a minor or trivial token's picks
    after its top-1 in the routing phase, whose key is (expert in S, logit). Shared-set phase
    picks set their expert in S and leave nothing; a job with `clear` empties S first. Routing
    picks leave through `pick` (a register, held until taken). A token takes n_experts / lanes +
    picks + 1 cycles when nothing stalls. With `params.pick_register` the max tree has a register
    after that many levels and a pick takes two cycles (the tree settles, then the pick commits):
    n_experts / lanes + 2 picks + 1 cycles."""
    def __init__(self, params: PruParams):
        self._p = params
        super().__init__({"job": In(stream.Signature(params.job_layout)),
                          "logit": In(stream.Signature(params.logit_layout)),
                          "pick": Out(stream.Signature(params.pick_layout))})

    def elaborate(self, platform):
        m = Module()
        p, o = self._p, self.pick
        e = p.n_experts
        # a shift register by `lanes` entries per beat: the logits arrive in expert order, so
        # after the token's last beat entry i holds expert i's logit without an address decoder
        logits = [Signal(signed(LOGIT_BITS), name=f"logit_{i}", reset_less=True) for i in range(e)]
        job = Signal(p.job_layout, reset_less=True)
        index = Signal(range(p.beats_per_token))
        # without reset (as every register a job loads before use): a job clears `taken`, a
        # layer's first job S; fewer reset loads keep the reset net off the critical path
        taken = Signal(e, reset_less=True)
        s = Signal(e, reset_less=True)
        picked = Signal(p.pick_bits)

        prefer_s = ~job.shared & (job.cls != TokenClass.MAJOR) & (picked != 0)
        # offset binary: the signed logit compares as unsigned; S membership above its top bit
        keys = [Cat(logits[i].as_unsigned() ^ (1 << (LOGIT_BITS - 1)), prefer_s & s[i])
                for i in range(e)]
        _, key, winner = max_tree(m, [(~taken[i], keys[i]) for i in range(e)], p.pick_register)
        # with the register, the tree's answer is a cycle old: a pick commits on every second
        # cycle of Pick, once the register holds the tree over the current `taken` and `picked`
        settled = Signal(init=p.pick_register == 0)
        winner_logit = (key[:LOGIT_BITS] ^ (1 << (LOGIT_BITS - 1))).as_signed()

        with m.If(o.ready):
            m.d.sync += o.valid.eq(0)
        with m.FSM(name="fsm"):
            with m.State("Take-Job"):
                m.d.comb += self.job.ready.eq(1)
                with m.If(self.job.valid):
                    m.d.sync += [job.eq(self.job.payload), index.eq(0), taken.eq(0), picked.eq(0)]
                    with m.If(self.job.payload.clear):
                        m.d.sync += s.eq(0)
                    m.next = "Load-Logits"
            with m.State("Load-Logits"):
                m.d.comb += self.logit.ready.eq(1)
                with m.If(self.logit.valid):
                    lanes = p.lanes
                    m.d.sync += [logits[e - lanes + j].eq(self.logit.payload[j])
                                 for j in range(lanes)]
                    m.d.sync += [logits[i].eq(logits[i + lanes]) for i in range(e - lanes)]
                    m.d.sync += index.eq(index + 1)
                    with m.If(index == p.beats_per_token - 1):
                        m.next = "Pick"
                        with m.If(job.picks == 0):
                            m.next = "Take-Job"
            with m.State("Pick"):
                if p.pick_register:
                    m.d.sync += settled.eq(1)
                with m.If(settled & (job.shared | ~o.valid | o.ready)):
                    if p.pick_register:
                        m.d.sync += settled.eq(0)
                    last = picked + 1 == job.picks
                    m.d.sync += [taken.eq(taken | (Const(1, 1) << winner)), picked.eq(picked + 1)]
                    with m.If(job.shared):
                        m.d.sync += s.eq(s | (Const(1, 1) << winner))
                    with m.Else():
                        m.d.sync += [o.valid.eq(1), o.payload.expert.eq(winner),
                                     o.payload.logit.eq(winner_logit), o.payload.cls.eq(job.cls),
                                     o.payload.layer.eq(job.layer),
                                     o.payload.chunk_last.eq(job.chunk_last),
                                     o.payload.last.eq(last)]
                    with m.If(last):
                        m.next = "Take-Job"
        return m
