"""`EmaSystem`: the EMA controller with its memories."""

from __future__ import annotations

from amaranth.hdl import Module, unsigned
from amaranth.lib import stream, wiring
from amaranth.lib.memory import Memory, WritePort
from amaranth.lib.wiring import In, Out, connect, flipped

from ...contracts.ema import (CSR_ADDR_BITS, CSR_DATA_BITS, MASK_BITS, ema_command_layout,
                              ema_completion_layout)
from ...contracts.weight_layout import WeightLayout
from ..axi import Axi4Signature, forward
from .allocator import issued_signature
from .controller import DEFAULTS, EmaController
from .geometry import AXI_ID_WIDTH, EmaGeometry
from ..streams import ReadSignature

__all__ = ["EmaSystem"]


class EmaSystem(wiring.Component):
    """The EMA controller with its memories: the banked weight buffer, the location table and
    the residency words, each an `amaranth.lib.memory.Memory`, plus read ports for the MAC
    cluster (and the benches). The AXI4 write channels are tied off (the EMA only reads), so a
    full AXI4 slave model attaches to `m_axi`.

    Buffer line L lives in bank L % buffer_banks at row L // buffer_banks, so consecutive lines of a
    column sit in different banks and the MAC cluster reads `buffer_banks` lines per cycle.

    The defaults are the configuration's (`DEFAULTS`).

    Ports (besides the controller's cmd, done, csr)
    -----
    m_axi : Out(Axi4Signature(addr_width, data_width, 4))
    buf_rd : per bank, row in, line out one cycle later
    loc_rd : per reader (`loc_readers`: the top's two feeder lanes), location-table entry
        (slot * chan_stride + channel) in, buffer line out one cycle later
    res_rd : residency word (slot * res_words_per_slot + word) in, mask of resident channels out
    buf_wr : observation (outputs only): the weight-buffer write the controller makes this
        cycle, line address (not bank and row), one beat of data, enable
    issued, filled : the controller's early starts (a descriptor's slot once its location
        entries are written; the buffer lines written so far this step)
    loc_wr : observation: the location-table write of this cycle, entry
        (slot * chan_stride + channel, or the slot's scale_entry), buffer line, enable

    `buf_wr` and `loc_wr` are copies of the memories' write ports, so a bench sees what is
    written and when without reaching into the hierarchy; nothing inside reads them.
    """

    def __init__(self, layout: WeightLayout, *, data_width: int = DEFAULTS["data_width"],
                 addr_width: int = DEFAULTS["addr_width"],
                 outstanding: int = DEFAULTS["outstanding"],
                 buffer_bytes: int = DEFAULTS["buffer_bytes"],
                 buffer_banks: int = DEFAULTS["buffer_banks"], slots: int = DEFAULTS["slots"],
                 loc_readers: int = 1):
        if buffer_banks not in (1, 2, 4, 8):
            raise ValueError(f"buffer_banks must be one of 1, 2, 4, 8, not {buffer_banks!r}")
        if loc_readers not in (1, 2):
            raise ValueError(f"loc_readers must be 1 or 2, not {loc_readers!r}")
        # the controller validates every parameter it shares with this wrapper
        self._controller = EmaController(layout, data_width=data_width, addr_width=addr_width,
                                         outstanding=outstanding, buffer_bytes=buffer_bytes,
                                         slots=slots)
        self._banks = buffer_banks
        c = self._controller
        g = c.geometry
        row_bits = g.row_bits(buffer_banks)
        super().__init__({
            "cmd": In(stream.Signature(ema_command_layout)),
            "done": Out(stream.Signature(ema_completion_layout)),
            "m_axi": Out(Axi4Signature(addr_width, data_width, AXI_ID_WIDTH)),
            "csr": In(ReadSignature(CSR_ADDR_BITS, CSR_DATA_BITS)),
            "buf_rd": In(ReadSignature(row_bits, data_width)).array(buffer_banks),
            "loc_rd": In(ReadSignature(g.loc_addr_bits, g.line_bits)).array(loc_readers),
            "res_rd": In(ReadSignature(g.res_addr_bits, MASK_BITS)),
            # the write ports' signature from the writer's side: every member an output here
            "buf_wr": In(WritePort.Signature(addr_width=g.line_bits, shape=data_width)),
            "loc_wr": In(WritePort.Signature(addr_width=g.loc_addr_bits, shape=g.line_bits)),
            "issued": Out(issued_signature()),
            "filled": Out(range(g.lines + 1)),
        })

    @property
    def controller(self) -> EmaController:
        return self._controller

    @property
    def geometry(self) -> EmaGeometry:
        return self._controller.geometry

    @property
    def buffer_banks(self) -> int:
        return self._banks

    @property
    def slots_entries(self) -> int:
        return self._controller.slots * self.geometry.chan_stride

    def elaborate(self, platform):
        m = Module()
        c = m.submodules.controller = self._controller
        g = c.geometry
        banks = self._banks
        bank_bits = (banks - 1).bit_length()

        connect(m, flipped(self.cmd), c.cmd)
        connect(m, c.done, flipped(self.done))
        connect(m, flipped(self.csr), c.csr)
        connect(m, c.issued, flipped(self.issued))
        m.d.comb += self.filled.eq(c.filled)
        _write(m, c.buf_wr, self.buf_wr)
        _write(m, c.loc_wr, self.loc_wr)
        forward(m, self.m_axi, c.m_axi)
        # write channels tied off: never a write, every response accepted
        m.d.comb += [self.m_axi.awvalid.eq(0), self.m_axi.wvalid.eq(0), self.m_axi.bready.eq(1)]

        for b in range(banks):
            bank = m.submodules[f"buffer_bank{b}"] = Memory(
                shape=unsigned(g.data_width), depth=g.lines // banks, init=[])
            wr, rd = bank.write_port(), bank.read_port()
            m.d.comb += [wr.addr.eq(c.buf_wr.addr >> bank_bits), wr.data.eq(c.buf_wr.data),
                         wr.en.eq(c.buf_wr.en & ((c.buf_wr.addr & (banks - 1)) == b))]
            _read(m, flipped(self.buf_rd[b]), rd)

        loc = m.submodules.locations = Memory(shape=unsigned(g.line_bits),
                                              depth=self.slots_entries, init=[])
        _write(m, c.loc_wr, loc.write_port())
        for port in self.loc_rd:
            _read(m, flipped(port), loc.read_port())

        res = m.submodules.residency = Memory(shape=unsigned(MASK_BITS),
                                              depth=c.slots * g.res_words_per_slot, init=[])
        _write(m, c.res_wr, res.write_port())
        _read(m, c.res_rd, res.read_port())
        _read(m, flipped(self.res_rd), res.read_port())
        return m


def _write(m: Module, source, port):
    """Join a controller's write port to a memory's (their address widths may differ by the
    memory's rounding of its depth, so member by member, not `connect`)."""
    m.d.comb += [port.addr.eq(source.addr), port.data.eq(source.data), port.en.eq(source.en)]


def _read(m: Module, reader, port):
    """Join a reader (`ReadSignature`: address out, data in) to a memory's read port, whose
    enable stays at its initial 1: a read on every cycle."""
    m.d.comb += [port.addr.eq(reader.addr), reader.data.eq(port.data)]
