"""`EmaController`: the parts of the EMA controller joined by streams and queues."""

from __future__ import annotations

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.memory import WritePort
from amaranth.lib.wiring import In, Out, connect, flipped

from ...contracts.ema import (CSR_ADDR_BITS, CSR_DATA_BITS, EXPERT_BITS, LAYER_BITS, MASK_BITS,
                              ema_command_layout, ema_completion_layout)
from ...contracts.weight_layout import WeightLayout
from ..axi import Axi4ReadSignature, forward
from .allocator import Allocator, LocationWriter, issued_signature, location_layout, read_layout
from .decoder import Decoder
from .geometry import AXI_ID_WIDTH, DATA_WIDTHS, EmaGeometry
from .issuer import BurstIssuer, burst_layout
from ..streams import ReadSignature, StreamFIFO
from .registers import Registers
from .writer import BeatWriter

__all__ = ["DEFAULTS", "EmaController"]

#: the constructors' defaults, as keyword arguments of `EmaSystem`: the bundled configuration's
#: `hardware.ema` (edgexpert/contracts/configs/default.yaml; tests/test_config.py checks that they
#: agree), so a controller built without arguments is the one `edgexpert synth ema` and the
#: benchmark measure. Given here, not read from the configuration: hw/ takes its parameters as
#: arguments (edgexpert/contracts/hardware.py translates the configuration)
DEFAULTS = {"data_width": 256, "addr_width": 32, "outstanding": 48, "buffer_bytes": 262144,
            "buffer_banks": 4, "slots": 32}

#: entries of the work and location queues: they let the allocator go on while the issuer cuts
#: a long read into bursts and the location writer writes a long run's entries
SMALL_QUEUE_DEPTH = 4


def _check_int(name: str, value, lo: int, hi: int):
    if not isinstance(value, int) or isinstance(value, bool) or not lo <= value <= hi:
        raise ValueError(f"{name} must be an integer in {lo}..{hi}, not {value!r}")


class EmaController(wiring.Component):
    """Descriptor stream in, AXI4 read master out, weight-buffer writes, completions out.

    Parameters
    ----------
    layout : WeightLayout
        The external-memory map of the expert weights (fixes every address).
    data_width : int
        AXI data width in bits: 64, 128 or 256.
    addr_width : int
        AXI address width, 16..64; must reach the end of the weights.
    outstanding : int
        AXI read bursts in flight at once, 1..64.
    buffer_bytes : int
        Weight-buffer size in bytes: a power of two, 1 KiB..1 MiB.
    slots : int
        Slot-table entries (distinct layer/expert/matrix per step), 1..128.

    The defaults are the configuration's (`DEFAULTS`).

    Ports
    -----
    cmd : In(stream.Signature(ema_command_layout))
    done : Out(stream.Signature(ema_completion_layout))
    m_axi : Out(Axi4ReadSignature(addr_width, data_width, 4))
    buf_wr : line address, data, enable of the weight buffer (one line = one beat)
    loc_wr : entry address (slot * chan_stride + channel), buffer line, enable
    res_rd, res_wr : residency words (slot * res_words_per_slot + word), 1-cycle read latency
    csr : register read port (`EmaCsr` address in, 64-bit data out one cycle later)
    issued : a pulse per descriptor once its location entries are written (`issued_signature`)
    filled : buffer lines 0 .. filled - 1 hold this step's data (the lines fill in order: bump
        allocation, bursts issued in that order, one AXI ID); every line once the engine has
        stopped on an error and no read is left to write. Valid while a step's reads are all
        written before the next NEW_STEP is sent (the top's rule, docs/blocks/top.md)

    Inside (docs/blocks/ema.md): `Decoder` -> `Allocator` -> work queue -> `BurstIssuer` ->
    in-flight queue -> `BeatWriter`; the allocator's location queue feeds the `LocationWriter`;
    `Registers` latches errors and counts.
    """

    def __init__(self, layout: WeightLayout, *, data_width: int = DEFAULTS["data_width"],
                 addr_width: int = DEFAULTS["addr_width"],
                 outstanding: int = DEFAULTS["outstanding"],
                 buffer_bytes: int = DEFAULTS["buffer_bytes"], slots: int = DEFAULTS["slots"]):
        if not isinstance(layout, WeightLayout):
            raise TypeError(f"layout must be a WeightLayout, not {layout!r}")
        if data_width not in DATA_WIDTHS:
            raise ValueError(f"data_width must be one of 64, 128, 256, not {data_width!r}")
        _check_int("addr_width", addr_width, 16, 64)
        _check_int("outstanding", outstanding, 1, 64)
        _check_int("slots", slots, 1, 128)
        if buffer_bytes not in tuple(2**n for n in range(10, 21)):
            raise ValueError(f"buffer_bytes must be a power of two in 1024..1048576, "
                             f"not {buffer_bytes!r}")
        end = layout.base_address + layout.total_bytes
        if end > 2**addr_width:
            raise ValueError(f"addr_width {addr_width} does not reach the end of the weights "
                             f"({end:#x}): accepted {max(16, (end - 1).bit_length())}..64")
        if layout.n_layers > 2**LAYER_BITS or layout.experts_per_layer > 2**EXPERT_BITS:
            raise ValueError(f"the descriptor holds at most {2**LAYER_BITS} layers and "
                             f"{2**EXPERT_BITS} experts, not {layout.n_layers} and "
                             f"{layout.experts_per_layer}")
        self._geometry = g = EmaGeometry(layout, data_width, buffer_bytes, slots)
        self._addr_width = addr_width
        self._outstanding = outstanding
        super().__init__({
            "cmd": In(stream.Signature(ema_command_layout)),
            "done": Out(stream.Signature(ema_completion_layout)),
            "m_axi": Out(Axi4ReadSignature(addr_width, data_width, AXI_ID_WIDTH)),
            "buf_wr": In(WritePort.Signature(addr_width=g.line_bits, shape=data_width)),
            "loc_wr": In(WritePort.Signature(addr_width=g.loc_addr_bits, shape=g.line_bits)),
            "res_rd": Out(ReadSignature(g.res_addr_bits, MASK_BITS)),
            "res_wr": In(WritePort.Signature(addr_width=g.res_addr_bits, shape=MASK_BITS)),
            "csr": In(ReadSignature(CSR_ADDR_BITS, CSR_DATA_BITS)),
            "issued": Out(issued_signature()),
            "filled": Out(range(g.lines + 1)),
        })

    # --- parameters, read-only -------------------------------------------------------------
    @property
    def geometry(self) -> EmaGeometry:
        return self._geometry

    @property
    def layout(self) -> WeightLayout:
        return self._geometry.layout

    @property
    def data_width(self) -> int:
        return self._geometry.data_width

    @property
    def addr_width(self) -> int:
        return self._addr_width

    @property
    def outstanding(self) -> int:
        return self._outstanding

    @property
    def buffer_bytes(self) -> int:
        return self._geometry.buffer_bytes

    @property
    def slots(self) -> int:
        return self._geometry.slots

    @property
    def loc_addr_bits(self) -> int:
        return self._geometry.loc_addr_bits

    @property
    def res_addr_bits(self) -> int:
        return self._geometry.res_addr_bits

    def elaborate(self, platform):
        m = Module()
        g, aw, n = self._geometry, self._addr_width, self._outstanding
        decoder = m.submodules.decoder = Decoder(g, aw)
        allocator = m.submodules.allocator = Allocator(g, aw)
        work = m.submodules.work = StreamFIFO(read_layout(g, aw), SMALL_QUEUE_DEPTH)
        locations = m.submodules.locations = StreamFIFO(location_layout(g), SMALL_QUEUE_DEPTH)
        loc_writer = m.submodules.loc_writer = LocationWriter(g)
        issuer = m.submodules.issuer = BurstIssuer(g, aw, n)
        # buffered (registered output): the head entry decides every beat's buffer line, and an
        # unregistered read through the queue was the controller's critical path. Depth: the
        # bursts in flight and a few markers between them (a full queue only holds the issuer).
        inflight = m.submodules.inflight = StreamFIFO(burst_layout(g), n + 3, buffered=True)
        writer = m.submodules.writer = BeatWriter(g)
        regs = m.submodules.registers = Registers(g, n)

        # the pipeline
        connect(m, flipped(self.cmd), decoder.cmd)
        connect(m, decoder.items, allocator.items)
        connect(m, allocator.reads, work.w)
        connect(m, work.r, issuer.reads)
        connect(m, allocator.locations, locations.w)
        connect(m, locations.r, loc_writer.locations)
        connect(m, issuer.bursts, inflight.w)
        connect(m, inflight.r, writer.bursts)
        connect(m, writer.done, flipped(self.done))
        # the outside: bus, memories, registers
        forward(m, self.m_axi, issuer.ar)
        forward(m, self.m_axi, writer.r)
        connect(m, writer.buf_wr, flipped(self.buf_wr))
        connect(m, loc_writer.loc_wr, flipped(self.loc_wr))
        connect(m, decoder.res_rd, flipped(self.res_rd))
        connect(m, decoder.res_wr, flipped(self.res_wr))
        connect(m, flipped(self.csr), regs.csr)
        # errors, and what each part must know of the others
        connect(m, writer.error, regs.beat_error)
        connect(m, allocator.error, regs.buffer_error)
        connect(m, decoder.error, regs.command_error)
        m.d.comb += [
            decoder.stopped.eq(regs.stopped), allocator.stopped.eq(regs.stopped),
            allocator.new_step.eq(decoder.new_step),
            issuer.bus_error.eq(writer.bus_error), issuer.burst_done.eq(writer.burst_done),
        ]
        # early starts: a descriptor's slot once its entries are written, and the lines written
        # so far this step (a line is written the cycle before `filled` passes it, so a read
        # issued when `line < filled` returns the new data)
        m.d.comb += [self.issued.valid.eq(loc_writer.issued.valid),
                     self.issued.payload.eq(loc_writer.issued.payload)]
        filled = Signal(range(g.lines + 1))
        with m.If(writer.buf_wr.en):
            m.d.sync += filled.eq(writer.buf_wr.addr + 1)
        with m.If(decoder.new_step):
            m.d.sync += filled.eq(0)
        # after an error nothing more is fetched: once the reads already issued are written,
        # the lines that stay unwritten never will be, and a consumer must not wait for them
        settled = regs.stopped & ~work.r.valid & ~issuer.busy & ~inflight.r.valid
        m.d.comb += self.filled.eq(Mux(settled, g.lines, filled))
        # what the counters count
        m.d.comb += [
            regs.busy.eq(decoder.busy | work.r.valid | issuer.busy | loc_writer.busy
                         | locations.r.valid | inflight.r.valid),
            regs.beat.eq(writer.beat), regs.written.eq(writer.buf_wr.en),
            regs.burst.eq(issuer.ar.arvalid & issuer.ar.arready),
            regs.completion.eq(self.done.valid & self.done.ready),
            regs.fetched.eq(allocator.fetched), regs.skipped.eq(decoder.skipped),
            regs.in_flight.eq(issuer.in_flight),
        ]
        return m
