"""A8W4 dot-product lane: the seed of the MAC cluster.

Each input beat carries `pairs_per_beat` int8 activations, as many int4 weights and a `last`
flag. The lane multiplies pairwise, sums the products of the beat in an adder tree and adds the
sum into an int32 accumulator. The beat flagged `last` closes the dot product: the accumulated
value leaves on the output stream and the accumulator restarts from zero.

Contract (mirrored by `edgexpert.golden.integer.a8w4.dot_a8w4`):
- products are exact (int8 x int4 fits 12 bits), beat sums are exact;
- the accumulator wraps modulo 2**32 (two's complement), as an int32 register does;
- one beat per cycle when the output is not back-pressured; latency from the `last` beat's
  transfer to the result's `valid` is 2 cycles;
- nothing is dropped: the input stalls (`ready` low) while a result waits for the consumer.
"""

from amaranth.hdl import Module, Signal, signed
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

__all__ = ["ACC_WIDTH", "mac_lane_input_layout", "MacLane"]

#: width of the accumulator and of the output payload
ACC_WIDTH = 32


def mac_lane_input_layout(pairs_per_beat: int) -> data.StructLayout:
    """Payload of one input beat: `pairs_per_beat` (activation, weight) pairs and `last`."""
    return data.StructLayout({
        "act": data.ArrayLayout(signed(8), pairs_per_beat),
        "wgt": data.ArrayLayout(signed(4), pairs_per_beat),
        "last": 1,
    })


def _adder_tree(terms):
    # balanced, so the beat sum's depth grows with log2(pairs_per_beat), not linearly
    while len(terms) > 1:
        terms = [terms[i] + terms[i + 1] if i + 1 < len(terms) else terms[i]
                 for i in range(0, len(terms), 2)]
    return terms[0]


class MacLane(wiring.Component):
    """Stream-fed int8 x int4 dot product with an int32 wrapping accumulator.

    Parameters
    ----------
    pairs_per_beat : int
        Products summed per input beat, 1..64.

    Ports
    -----
    pairs : In(stream.Signature(mac_lane_input_layout(pairs_per_beat)))
    dot : Out(stream.Signature(signed(32))), one result per `last` beat
    """

    def __init__(self, pairs_per_beat: int = 4):
        if not isinstance(pairs_per_beat, int) or isinstance(pairs_per_beat, bool) \
                or not 1 <= pairs_per_beat <= 64:
            raise TypeError(f"pairs_per_beat must be an integer in 1..64, not {pairs_per_beat!r}")
        self._pairs_per_beat = pairs_per_beat
        super().__init__({
            "pairs": In(stream.Signature(mac_lane_input_layout(pairs_per_beat))),
            "dot": Out(stream.Signature(signed(ACC_WIDTH))),
        })

    @property
    def pairs_per_beat(self) -> int:
        return self._pairs_per_beat

    def elaborate(self, platform):
        m = Module()
        beat = self.pairs.payload

        # Stage 1: the beat's products, summed, registered.
        beat_sum = _adder_tree([beat.act[i] * beat.wgt[i] for i in range(self._pairs_per_beat)])
        s1_valid = Signal()
        s1_sum = Signal.like(beat_sum)
        s1_last = Signal()

        # Stage 2: accumulate; a `last` beat moves the total into the output register, which it
        # may only do when that register is empty or being emptied this cycle.
        acc = Signal(signed(ACC_WIDTH))
        total = Signal(signed(ACC_WIDTH))
        m.d.comb += total.eq(acc + s1_sum)  # truncation to 32 bits is the int32 wrap
        out_free = ~self.dot.valid | self.dot.ready
        s1_take = s1_valid & (~s1_last | out_free)

        m.d.comb += self.pairs.ready.eq(~s1_valid | s1_take)
        with m.If(self.pairs.valid & self.pairs.ready):
            m.d.sync += [s1_valid.eq(1), s1_sum.eq(beat_sum), s1_last.eq(beat.last)]
        with m.Elif(s1_take):
            m.d.sync += s1_valid.eq(0)

        with m.If(self.dot.ready):
            m.d.sync += self.dot.valid.eq(0)
        with m.If(s1_take):
            with m.If(s1_last):
                m.d.sync += [
                    self.dot.payload.eq(total),
                    self.dot.valid.eq(1),
                    acc.eq(0),
                ]
            with m.Else():
                m.d.sync += acc.eq(total)
        return m
