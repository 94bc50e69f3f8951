"""`TopRegisters`: the top's status and performance counters, and the one register read port
that also reaches the EMA controller's registers."""


from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from ...contracts.ema import CSR_ADDR_BITS, CSR_DATA_BITS, EmaStatus
from ...contracts.top import TOP_CSR_ADDR_BITS, TopCsr
from ..ema.geometry import COUNTER_BITS
from ..streams import ReadSignature

__all__ = ["TopRegisters"]


class TopRegisters(wiring.Component):
    """Counts the events and cycles of `TopCsr` (one flag or pulse each per cycle) and latches
    the first EMA completion that was not OK. `csr` reads one register one cycle after its
    address: addresses below `TOP_CSR_BASE` are forwarded to the EMA controller's port `ema`
    (same latency), the others are the top's."""

    csr: In(ReadSignature(TOP_CSR_ADDR_BITS, CSR_DATA_BITS))
    ema: Out(ReadSignature(CSR_ADDR_BITS, CSR_DATA_BITS))
    busy: In(1)
    memory_wait: In(1)
    compute: In(1)
    group: In(1)
    matrix: In(1)
    word: In(1)
    dcu_job: In(1)
    descriptor_wait: In(1)
    feedback_wait: In(1)
    fault: In(1)
    fault_status: In(EmaStatus)
    fault_tag: In(8)

    def elaborate(self, platform):
        m = Module()
        counted = {TopCsr.BUSY_CYCLES: self.busy, TopCsr.MEMORY_WAIT_CYCLES: self.memory_wait,
                   TopCsr.COMPUTE_CYCLES: self.compute, TopCsr.GROUPS: self.group,
                   TopCsr.MATRICES: self.matrix, TopCsr.WORDS: self.word,
                   TopCsr.DCU_JOBS: self.dcu_job,
                   TopCsr.DESCRIPTOR_WAIT_CYCLES: self.descriptor_wait,
                   TopCsr.FEEDBACK_WAIT_CYCLES: self.feedback_wait}
        counters = {reg: Signal(COUNTER_BITS, name=reg.name.lower()) for reg in counted}
        for reg, event in counted.items():
            with m.If(event):
                m.d.sync += counters[reg].eq(counters[reg] + 1)
        error = Signal()
        status = Signal(2)
        tag = Signal(8)
        with m.If(self.fault & ~error):
            m.d.sync += [error.eq(1), status.eq(self.fault_status), tag.eq(self.fault_tag)]

        m.d.comb += self.ema.addr.eq(self.csr.addr[:CSR_ADDR_BITS])
        own = Signal()
        value = Signal(CSR_DATA_BITS)
        m.d.sync += own.eq(self.csr.addr[CSR_ADDR_BITS])
        with m.Switch(self.csr.addr):
            with m.Case(TopCsr.STATUS):
                m.d.sync += value.eq(self.busy | error << 1 | status << 2 | tag << 8)
            for reg, counter in counters.items():
                with m.Case(reg):
                    m.d.sync += value.eq(counter)
            with m.Default():
                m.d.sync += value.eq(0)
        m.d.comb += self.csr.data.eq(Mux(own, value, self.ema.data))
        return m
