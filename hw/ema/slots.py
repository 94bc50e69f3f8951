"""The decoder's helpers: the slot table of a step and the run finder of a mask word."""


from amaranth.hdl import Cat, Const, Module, Signal
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from ...contracts.ema import EXPERT_BITS, LAYER_BITS, MASK_BITS
from .geometry import EmaGeometry, bits_for
from ..streams import field_registers

__all__ = ["key_layout", "SlotTable", "RunFinder"]

#: what a slot holds: one matrix of one expert
key_layout = data.StructLayout({"layer": LAYER_BITS, "expert": EXPERT_BITS, "matrix": 1})


def lowest_one(value):
    """The lowest set bit of `value`, alone (one-hot), or 0."""
    return value & (-value)[:len(value)]


def encode(m: Module, onehot) -> Signal:
    """Index of the bit set in `onehot` (an OR tree per index bit: log depth, not a mux chain)."""
    out = Signal(bits_for(len(onehot) - 1))
    for b in range(len(out)):
        m.d.comb += out[b].eq(Cat(onehot[i] for i in range(len(onehot)) if (i >> b) & 1).any())
    return out


class SlotTable(wiring.Component):
    """The (layer, expert, matrix) of every slot taken in this step, and which slots have their
    scale block resident; flip-flops, `slots` comparators.

    Combinationally: `hit` and `hit_slot` say whether `key` already has a slot (0..free_slot - 1),
    `full` that no slot is left, `free_slot` the one `take` would give, `scales` the scale bit of
    `scale_slot`. On the clock: `take` gives `key` the slot `free_slot`, `set_scales` sets the
    scale bit of `scale_slot`, `clear` (NEW_STEP) frees every slot. The strobes are exclusive.
    """
    def __init__(self, geometry: EmaGeometry):
        self._g = geometry
        slot = geometry.slot_bits
        super().__init__({
            "key": In(key_layout), "hit": Out(1), "hit_slot": Out(slot), "full": Out(1),
            "free_slot": Out(slot), "take": In(1), "clear": In(1),
            "scale_slot": In(slot), "scales": Out(1), "set_scales": In(1),
        })

    def elaborate(self, platform):
        m = Module()
        n = self._g.slots
        # entries at and above next_slot are never looked at: no reset needed
        keys = [field_registers(key_layout, f"slot{i}") for i in range(n)]
        scales = Signal(n, reset_less=True)
        next_slot = Signal(range(n + 1))
        hits = Signal(n)
        for i in range(n):
            m.d.comb += hits[i].eq((i < next_slot) & (keys[i].layer == self.key.layer)
                                   & (keys[i].expert == self.key.expert)
                                   & (keys[i].matrix == self.key.matrix))
        m.d.comb += [self.hit.eq(hits.any()), self.hit_slot.eq(encode(m, hits)),
                     self.full.eq(next_slot == n), self.free_slot.eq(next_slot),
                     self.scales.eq(scales.bit_select(self.scale_slot, 1))]
        with m.If(self.take):
            m.d.sync += [next_slot.eq(next_slot + 1), scales.bit_select(next_slot, 1).eq(0)]
            for i in range(n):
                with m.If(next_slot == i):
                    m.d.sync += keys[i].eq(self.key)
        with m.If(self.set_scales):
            m.d.sync += scales.bit_select(self.scale_slot, 1).eq(1)
        with m.If(self.clear):
            m.d.sync += [next_slot.eq(0), scales.eq(0)]
        return m


class RunFinder(wiring.Component):
    """The lowest run of set bits of a mask word, combinationally: `first` is its lowest bit p,
    `end` the first clear bit q above it (MASK_BITS when the run reaches the top), `rest` the word
    without the run. Why it is cheap: `word + lowest_one(word)` carries through the run and stops
    at q, so one adder and two encoders find any run in one cycle."""
    word: In(MASK_BITS)
    first: Out(bits_for(MASK_BITS - 1))
    end: Out(bits_for(MASK_BITS))
    rest: Out(MASK_BITS)

    def elaborate(self, platform):
        m = Module()
        w = self.word
        lsb = lowest_one(w)
        carry = Signal(MASK_BITS + 1)
        m.d.comb += [carry.eq(w + lsb),
                     self.first.eq(encode(m, lsb)),
                     self.end.eq(encode(m, carry & ~Cat(w, Const(0, 1)))),
                     self.rest.eq(w & carry[:MASK_BITS])]
        return m
