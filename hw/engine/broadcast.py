"""One stream to two consumers."""

from __future__ import annotations

from amaranth.hdl import Module, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

__all__ = ["Broadcast"]


class Broadcast(wiring.Component):
    """Each item of `i` is delivered once on `a` and once on `b`, each at its own pace: an output
    that took the item drops `valid` until the other one has taken it too (neither waits for the
    other's `ready` to raise `valid`). No storage: `i` holds the item until both took it."""

    def __init__(self, shape):
        super().__init__({
            "i": In(stream.Signature(shape)),
            "a": Out(stream.Signature(shape)),
            "b": Out(stream.Signature(shape)),
        })

    def elaborate(self, platform):
        m = Module()
        taken = {"a": Signal(name="taken_a"), "b": Signal(name="taken_b")}
        done = []
        for name, flag in taken.items():
            port = getattr(self, name)
            m.d.comb += [port.valid.eq(self.i.valid & ~flag), port.payload.eq(self.i.payload)]
            done.append(flag | port.ready)
            with m.If(port.valid & port.ready):
                m.d.sync += flag.eq(1)
        m.d.comb += self.i.ready.eq(done[0] & done[1])
        with m.If(self.i.valid & self.i.ready):
            m.d.sync += [flag.eq(0) for flag in taken.values()]
        return m
