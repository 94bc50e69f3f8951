"""The DCU: the four stages and their memories."""

from __future__ import annotations

from amaranth.hdl import Module
from amaranth.lib import stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from ...contracts.dcu import (LANES, DcuCsr, DcuError, dcu_data_layout, dcu_entry_layout,
                              dcu_route_layout)
from ...contracts.ema import CSR_DATA_BITS, EXPERT_BITS, LAYER_BITS, TAG_BITS, ema_command_layout
from .accumulator import Accumulator, importance_layout
from .collector import Collector
from .geometry import WEIGHT_BITS, DcuGeometry
from .selector import Selector
from .weigher import Weigher
from ..rejects import RejectRegisters, reject_signature, report
from ..streams import ReadSignature

__all__ = ["Dcu"]


def _check(name: str, value) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(f"{name} must be an integer, not {value!r}")
    return value


class Dcu(wiring.Component):
    """Depth coalescing unit (docs/blocks/dcu.md): jobs in on `route` and `data`
    (edgexpert.contracts.dcu), EMA commands out on `cmd`.

    Parameters: `gate_up_channels` and `down_channels` (the matrices' input channels: d_model
    and the expert's hidden width), `max_group` (candidates per depth group, 1..64), `layers`
    and `experts` (per layer, shared ones included) a job may name (default: every value the
    header's fields hold).

    A job with a field out of range for these (docs/contracts.md, "DCU jobs: accepted ranges")
    is rejected: its beats are taken as its header announces and dropped, nothing goes out on
    `cmd`, and one cycle of `rejected` (nothing to acknowledge) gives its tag and first bad field
    (`DcuError`); STATUS keeps the first one and REJECTED counts them (`csr`: `DcuCsr` address
    in, the register one cycle later). The next job is taken as usual.

    Two jobs at a time: while the selector searches one job's threshold (ceil(B / 4) passes
    over its words, B the largest key's bit length) and offers its commands (2 + words cycles
    at full speed), the next job's route beats are taken one per cycle, its n candidates'
    weights computed (n + 2 cycles) and its data beats taken one per cycle (n x words, plus
    three), into the other bank of the prune and importance memories. `route` takes no
    header from the time a job leaves the collector until it reaches the selector; `data` is
    taken only while the job's data is due. Both inputs may pause at any time; `cmd` holds
    until taken.
    """

    def __init__(self, gate_up_channels: int = 192, down_channels: int = 64, max_group: int = 64,
                 *, layers: int = 2**LAYER_BITS, experts: int = 2**EXPERT_BITS):
        self._g = DcuGeometry(_check("gate_up_channels", gate_up_channels),
                              _check("down_channels", down_channels),
                              _check("max_group", max_group), _check("layers", layers),
                              _check("experts", experts))
        super().__init__({
            "route": In(stream.Signature(dcu_route_layout)),
            "data": In(stream.Signature(dcu_data_layout)),
            "cmd": Out(stream.Signature(ema_command_layout)),
            "rejected": Out(reject_signature(DcuError, TAG_BITS)),
            "csr": In(ReadSignature(DcuCsr.as_shape().width, CSR_DATA_BITS)),
        })

    @property
    def geometry(self) -> DcuGeometry:
        return self._g

    def elaborate(self, platform):
        m = Module()
        g = self._g
        m.submodules.collector = collector = Collector(g)
        m.submodules.weigher = weigher = Weigher(g)
        m.submodules.accumulator = accumulator = Accumulator(g)
        m.submodules.selector = selector = Selector(g)
        m.submodules.registers = registers = RejectRegisters(DcuError, TAG_BITS)
        # two banks: the selector reads one job's while the next job's are written
        m.submodules.prune = prune = Memory(shape=LANES, depth=2 * g.max_words, init=[])
        m.submodules.entries = entries = Memory(shape=dcu_entry_layout, depth=g.max_group, init=[])
        m.submodules.weights = weights = Memory(shape=WEIGHT_BITS, depth=g.max_group, init=[])
        m.submodules.sums = sums = Memory(shape=importance_layout, depth=2 * g.max_words, init=[])

        wiring.connect(m, wiring.flipped(self.route), collector.route)
        wiring.connect(m, wiring.flipped(self.data), accumulator.data)
        wiring.connect(m, selector.cmd, wiring.flipped(self.cmd))
        wiring.connect(m, wiring.flipped(self.csr), registers.csr)
        # a rejected job's completion goes out and to the status register and counter
        report(m, registers, selector.rejected, selector.completed, out=self.rejected)
        wiring.connect(m, collector.job, weigher.i_job)
        wiring.connect(m, weigher.o_job, accumulator.i_job)
        wiring.connect(m, accumulator.o_job, selector.job)
        # the front takes the next job once this one has moved on to the selector
        m.d.comb += collector.passed.eq(accumulator.o_job.valid & accumulator.o_job.ready)

        def write(port, source):
            m.d.comb += [port.addr.eq(source.addr), port.data.eq(source.data),
                         port.en.eq(source.en)]

        def read(port, reader, en=None):
            m.d.comb += [port.addr.eq(reader.addr), reader.data.eq(port.data)]
            if en is not None:
                m.d.comb += port.en.eq(en)

        write(prune.write_port(), collector.prune_wr)
        write(entries.write_port(), collector.entry_wr)
        write(weights.write_port(), weigher.weight_wr)
        sums_wr = sums.write_port()
        write(sums_wr, accumulator.sums_wr)
        read(entries.read_port(), weigher.entry_rd)
        read(weights.read_port(), accumulator.weight_rd)
        # a beat may add to the word written on the same cycle (a matrix of one word)
        read(sums.read_port(transparent_for=(sums_wr,)), accumulator.sums_rd,
             accumulator.sums_rd_en)
        read(sums.read_port(), selector.sums_rd, selector.rd_en)
        read(prune.read_port(), selector.prune_rd, selector.rd_en)
        return m
