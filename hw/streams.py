"""Stream primitives every block shares: a queue between two streams, a synchronous read port,
registers built field by field, and a part's port brought out unchanged. Blocks import them
from here, never from one another."""

from __future__ import annotations

from amaranth.hdl import Cat, Module, Shape, Signal, Value, ValueLike
from amaranth.lib import data, stream, wiring
from amaranth.lib.fifo import SyncFIFO, SyncFIFOBuffered
from amaranth.lib.wiring import In, Out

__all__ = ["ReadSignature", "StreamFIFO", "field_registers", "answer_reads", "bring_out", "offer",
           "event_counter"]


class ReadSignature(wiring.Signature):
    """A synchronous read port seen from the reader: address out, data back one cycle later.

    It is `amaranth.lib.memory.ReadPort.Signature` (flipped) without `en`: the controller reads
    on every cycle, and the top-level ports (`res_rd`, `csr`, `EmaSystem`'s `buf_rd`, `loc_rd`)
    are the two signals the benches drive; an `en` input there would be one more pin to drive.
    """
    def __init__(self, addr_width: int, data_width: int):
        for name, value in (("addr_width", addr_width), ("data_width", data_width)):
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise TypeError(f"{name} must be a positive integer, not {value!r}")
        super().__init__({"addr": Out(addr_width), "data": In(data_width)})


def answer_reads(m: Module, port, registers: dict) -> None:
    """Serves the read port `port` (the reader's `ReadSignature`, flipped) from `registers`
    {address: value}: the value of the address one cycle after it, 0 for an address not in
    it (a register map's reserved addresses read as 0, as the EMA's)."""
    value = Signal(len(port.data), reset_less=True)
    m.d.comb += port.data.eq(value)
    with m.Switch(port.addr):
        for address, register in registers.items():
            with m.Case(address):
                m.d.sync += value.eq(register)
        with m.Default():
            m.d.sync += value.eq(0)


def bring_out(m: Module, outer, inner) -> None:
    """Joins a wrapper's port `outer` to the same port `inner` of a part inside it: an
    interface with `connect`, an array of ports (the EMA's `buf_rd`, one per bank) member by
    member, a plain output (the EMA's `filled`) by assignment."""
    pairs = zip(outer, inner) if isinstance(outer, list) else [(outer, inner)]
    for a, b in pairs:
        if isinstance(b, Value):
            m.d.comb += a.eq(b)
        else:
            wiring.connect(m, wiring.flipped(a), b)


def offer(m: Module, name: str, valid: ValueLike, outputs) -> Signal:
    """Offers one item, present while `valid`, to several output streams, each taking it in its
    own cycle; returns the source's `ready` (high in the cycle the last of them takes it or has
    taken it). `outputs` is [(stream, wanted)]: `wanted`, a condition on the item, says whether
    that output gets it at all. The caller drives each output's payload from the item.

    Why not offer to all at once with each `valid` waiting for the others' `ready`: an output's
    `valid` would then fall without a transfer when another's `ready` falls, which breaks the
    stream rule (docs/architecture.md, Streams; `edgexpert prove` found it in four of the top's
    parts). A flag per output remembers it has taken the item; the item stays offered to the
    others until the last takes it. With every `ready` high it takes one cycle, as before."""
    done, taken = [], []
    for i, (port, wanted) in enumerate(outputs):
        flag = Signal(name=f"{name}_taken{i}")
        m.d.comb += port.valid.eq(valid & wanted & ~flag)
        done.append(~wanted | flag | port.ready)
        taken.append((flag, port))
    ready = Signal(name=f"{name}_ready")
    m.d.comb += ready.eq(Cat(*done).all())
    for flag, port in taken:
        with m.If(valid & ready):
            m.d.sync += flag.eq(0)
        with m.Elif(port.valid & port.ready):
            m.d.sync += flag.eq(1)
    return ready


def event_counter(m: Module, name: str, increment: ValueLike, width: int) -> Signal:
    """A `width`-bit counter of `increment` (a pulse or a small count each cycle), one cycle
    behind it: the increment is registered first, so the counter's adder starts at flip-flops.
    Why: an event is often the end of a long handshake path (a rejection after a merge, a fork
    and a feeder), and ABC, meeting the clock, chains a 48-bit increment behind it (the top's
    critical path, 2026-12-03: 32 AND gates, 4.5 of its 9.45 ns)."""
    step = Signal(len(Value.cast(increment)), name=f"inc_{name}")
    counter = Signal(width, name=f"count_{name}")
    m.d.sync += [step.eq(increment), counter.eq(counter + step)]
    return counter


def field_registers(layout: data.StructLayout, name: str) -> data.View:
    """A reset-less register of `layout`, seen as a view but built from one signal per field.

    Why not `Signal(layout, reset_less=True)`: the logic is the same, but Yosys 0.23 and ABC
    mapped it larger from packed registers (`edgexpert synth`, default configuration): packed
    slot-table entries cost `ema` 1,081 more cells (+11%), a packed descriptor and item register
    `ema_system` 963 more (+7%).
    """
    return data.View(layout, Cat(*(Signal(field.shape, name=f"{name}_{key}", reset_less=True)
                                   for key, field in layout)))


class StreamFIFO(wiring.Component):
    """A queue of `layout` payloads between two streams: Amaranth's `SyncFIFO` (or
    `SyncFIFOBuffered`, whose output is a register) behind its `w_stream` / `r_stream`, with the
    payload seen as `layout` on both sides. The FIFO's readiness never depends on `valid`, so a
    producer that offers one item to two queues at once (valid only when the other is ready)
    cannot deadlock.

    Latency: `SyncFIFO` passes an item written on one cycle out on the next;
    `SyncFIFOBuffered` one cycle later.
    """
    def __init__(self, layout: data.Layout, depth: int, *, buffered: bool = False):
        if not isinstance(depth, int) or isinstance(depth, bool) or depth < 1:
            raise TypeError(f"depth must be a positive integer, not {depth!r}")
        self._layout = layout
        self._depth = depth
        self._buffered = bool(buffered)
        super().__init__({"w": In(stream.Signature(layout)), "r": Out(stream.Signature(layout))})

    def elaborate(self, platform):
        m = Module()
        kind = SyncFIFOBuffered if self._buffered else SyncFIFO
        fifo = m.submodules.fifo = kind(width=Shape.cast(self._layout).width, depth=self._depth)
        w, r = fifo.w_stream, fifo.r_stream
        m.d.comb += [w.payload.eq(self.w.payload), w.valid.eq(self.w.valid),
                     self.w.ready.eq(w.ready),
                     self.r.payload.eq(r.payload), self.r.valid.eq(r.valid),
                     r.ready.eq(self.r.ready)]
        return m
