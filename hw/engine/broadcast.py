"""One stream to two consumers."""

from __future__ import annotations

from amaranth.hdl import Module, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

__all__ = ["Broadcast"]


class Broadcast(wiring.Component):
    """Each item of `i_stream` is delivered once on `o_a` and once on `o_b`, each at its own
    pace: an output that took the item drops `valid` until the other one has taken it too
    (neither waits for the other's `ready` to raise `valid`). No storage: `i_stream` holds the
    item until both took it."""

    def __init__(self, shape):
        super().__init__({
            "i_stream": In(stream.Signature(shape)),
            "o_a": Out(stream.Signature(shape)),
            "o_b": Out(stream.Signature(shape)),
        })

    def elaborate(self, platform):
        m = Module()
        taken = {"o_a": Signal(name="taken_a"), "o_b": Signal(name="taken_b")}
        done = []
        for name, flag in taken.items():
            port = getattr(self, name)
            m.d.comb += [port.valid.eq(self.i_stream.valid & ~flag),
                         port.payload.eq(self.i_stream.payload)]
            done.append(flag | port.ready)
            with m.If(port.valid & port.ready):
                m.d.sync += flag.eq(1)
        m.d.comb += self.i_stream.ready.eq(done[0] & done[1])
        with m.If(self.i_stream.valid & self.i_stream.ready):
            m.d.sync += [flag.eq(0) for flag in taken.values()]
        return m
