"""The DCU's status register (the first rejected job), its two counters and their read port
(`DcuCsr`), in the EMA's register style (hw/ema/registers.py)."""

from __future__ import annotations

from amaranth.hdl import Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from ...contracts.dcu import DcuCsr, DcuError, dcu_reject_layout, dcu_status_layout
from ...contracts.ema import CSR_DATA_BITS, TAG_BITS
from ..ema.geometry import COUNTER_BITS
from ..streams import ReadSignature

__all__ = ["RejectSignature", "Registers"]

#: a rejected job's completion: `valid` for one cycle per job, nothing to acknowledge (a stream
#: with `ready` would stall the DCU where nobody listens; an always-ready stream's constant
#: `ready` cannot be a top-level port)
RejectSignature = wiring.Signature({"valid": Out(1), "payload": Out(dcu_reject_layout)})


class Registers(wiring.Component):
    """Latches the first rejected job (`rejected`: its first bad field and tag) in STATUS until
    reset, counts rejected jobs and the jobs `completed` with their commands (48-bit counters,
    as the EMA's). Unlike the EMA's STATUS, a rejection stops nothing: the DCU takes the next
    job as usual. `csr`: `DcuCsr` address in, the register one cycle later."""

    def __init__(self):
        super().__init__({
            "csr": In(ReadSignature(DcuCsr.as_shape().width, CSR_DATA_BITS)),
            "rejected": In(RejectSignature),
            "completed": In(1),
        })

    def elaborate(self, platform):
        m = Module()
        error, code, tag = Signal(), Signal(DcuError), Signal(TAG_BITS)
        with m.If(self.rejected.valid & ~error):
            m.d.sync += [error.eq(1), code.eq(self.rejected.payload.code),
                         tag.eq(self.rejected.payload.tag)]
        counters = {DcuCsr.JOBS: self.completed, DcuCsr.REJECTED: self.rejected.valid}
        counts = {}
        for reg, event in counters.items():
            counter = counts[reg] = Signal(COUNTER_BITS, name=f"count_{reg.name.lower()}")
            m.d.sync += counter.eq(counter + event)
        status = Signal(dcu_status_layout)
        m.d.comb += [status.error.eq(error), status.code.eq(code), status.tag.eq(tag)]
        data = Signal(CSR_DATA_BITS, reset_less=True)
        m.d.comb += self.csr.data.eq(data)
        with m.Switch(self.csr.addr):
            with m.Case(DcuCsr.STATUS):
                m.d.sync += data.eq(status.as_value())
            for reg, counter in counts.items():
                with m.Case(reg):
                    m.d.sync += data.eq(counter)
            with m.Default():
                m.d.sync += data.eq(0)
        return m
