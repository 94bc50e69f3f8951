"""`TopRegisters`: the top's status and performance counters, and the one register read port
that also reaches the EMA controller's registers and the checking blocks' (the command path's,
the DCU's, the PRU's)."""


from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from ...contracts.ema import CSR_ADDR_BITS, CSR_DATA_BITS, EmaStatus
from ...contracts.rejects import RejectCsr
from ...contracts.top import TOP_CSR_ADDR_BITS, TopCsr
from ..ema.geometry import COUNTER_BITS
from ..streams import ReadSignature

__all__ = ["TopRegisters"]


class TopRegisters(wiring.Component):
    """Counts the events and cycles of `TopCsr` (a flag, a pulse or a count each per cycle)
    and latches the first EMA completion that was not OK. `csr` reads one register one cycle
    after its address: addresses below `TOP_CSR_BASE` are forwarded to the EMA controller's port
    `ema`, the checking blocks' STATUS and REJECTED to their ports (`command`, `dcu`, `pru`:
    `RejectCsr` maps, the same latency; `pru` reads 0 in a top without a PRU), the others are
    the top's."""

    csr: In(ReadSignature(TOP_CSR_ADDR_BITS, CSR_DATA_BITS))
    ema: Out(ReadSignature(CSR_ADDR_BITS, CSR_DATA_BITS))
    command: Out(ReadSignature(RejectCsr.as_shape().width, CSR_DATA_BITS))
    dcu: Out(ReadSignature(RejectCsr.as_shape().width, CSR_DATA_BITS))
    pru: Out(ReadSignature(RejectCsr.as_shape().width, CSR_DATA_BITS))
    busy: In(1)
    memory_wait: In(1)
    compute: In(1)
    group: In(1)
    # the feeder's two lanes: up to two matrices end and two words move in a cycle
    matrix: In(2)
    word: In(2)
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
            m.d.sync += counters[reg].eq(counters[reg] + event)
        error = Signal()
        status = Signal(2)
        tag = Signal(8)
        with m.If(self.fault & ~error):
            m.d.sync += [error.eq(1), status.eq(self.fault_status), tag.eq(self.fault_tag)]

        m.d.comb += self.ema.addr.eq(self.csr.addr[:CSR_ADDR_BITS])
        forwarded = {TopCsr.COMMAND_STATUS: (self.command, RejectCsr.STATUS),
                     TopCsr.COMMAND_REJECTED: (self.command, RejectCsr.REJECTED),
                     TopCsr.DCU_STATUS: (self.dcu, RejectCsr.STATUS),
                     TopCsr.DCU_REJECTED: (self.dcu, RejectCsr.REJECTED),
                     TopCsr.PRU_STATUS: (self.pru, RejectCsr.STATUS),
                     TopCsr.PRU_REJECTED: (self.pru, RejectCsr.REJECTED)}
        # the register read answers from: 0 the EMA, 1 the top's own, then the ports above
        ports = [self.command, self.dcu, self.pru]
        source = Signal(range(2 + len(ports)))
        value = Signal(CSR_DATA_BITS)
        m.d.sync += source.eq(self.csr.addr[CSR_ADDR_BITS])
        with m.Switch(self.csr.addr):
            with m.Case(TopCsr.STATUS):
                m.d.sync += value.eq(self.busy | error << 1 | status << 2 | tag << 8)
            for reg, counter in counters.items():
                with m.Case(reg):
                    m.d.sync += value.eq(counter)
            for reg, (port, inner) in forwarded.items():
                with m.Case(reg):
                    m.d.comb += port.addr.eq(inner)
                    m.d.sync += source.eq(2 + ports.index(port))
            with m.Default():
                m.d.sync += value.eq(0)
        data = self.ema.data
        for i, port in enumerate(ports):
            data = Mux(source == 2 + i, port.data, data)
        m.d.comb += self.csr.data.eq(Mux(source == 1, value, data))
        return m
