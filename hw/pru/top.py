"""The prompt routing unit: its stages joined by streams."""

from __future__ import annotations

from amaranth.hdl import Module
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from ...contracts.ema import CSR_DATA_BITS, ema_command_layout
from ...contracts.pru import PROMPT_TAG_BITS, PruCsr, PruError
from ..rejects import RejectRegisters, reject_signature, report
from ..streams import ReadSignature
from .classifier import Classifier
from .fetch import FetchList
from .params import PruParams
from .renorm import Renormalizer
from .selector import Selector
from .sequencer import Sequencer

__all__ = ["Pru"]


class Pru(wiring.Component):
    """Scores and router logits in, routes and fetch commands out (hw/pru/__init__.py).

    A prompt with a field out of range for the instance (docs/contracts.md, "PRU prompts:
    accepted ranges") is rejected: the beats its first score beat announces are taken and
    dropped, nothing goes out on `route` or `cmd` for it, and one cycle of `rejected`
    (nothing to acknowledge) gives its number and first bad field (`PruError`) once its logits
    are taken; STATUS keeps the first one, PROMPTS and REJECTED count (`csr`: `PruCsr` address
    in, the register one cycle later). The next prompt is taken as usual."""
    def __init__(self, params: PruParams):
        if not isinstance(params, PruParams):
            raise TypeError(f"params must be a PruParams, not {params!r}")
        self._p = params
        super().__init__({"score": In(stream.Signature(params.score_layout)),
                          "logit": In(stream.Signature(params.logit_layout)),
                          "route": Out(stream.Signature(params.route_layout)),
                          "cmd": Out(stream.Signature(ema_command_layout)),
                          "rejected": Out(reject_signature(PruError, PROMPT_TAG_BITS)),
                          "csr": In(ReadSignature(PruCsr.as_shape().width, CSR_DATA_BITS))})

    @property
    def params(self) -> PruParams:
        return self._p

    def elaborate(self, platform):
        m = Module()
        p = self._p
        m.submodules.classifier = classifier = Classifier(p)
        m.submodules.sequencer = sequencer = Sequencer(p)
        m.submodules.selector = selector = Selector(p)
        m.submodules.renorm = renorm = Renormalizer(p)
        m.submodules.fetch = fetch = FetchList(p)
        m.submodules.registers = registers = RejectRegisters(PruError, PROMPT_TAG_BITS)
        wiring.connect(m, wiring.flipped(self.score), classifier.score)
        wiring.connect(m, classifier.token_class, sequencer.token_class)
        wiring.connect(m, sequencer.job, selector.job)
        wiring.connect(m, wiring.flipped(self.logit), selector.logit)
        wiring.connect(m, renorm.route, wiring.flipped(self.route))
        wiring.connect(m, fetch.cmd, wiring.flipped(self.cmd))
        wiring.connect(m, wiring.flipped(self.csr), registers.csr)
        # a prompt's completion: rejected ones out and to the status register, all counted
        report(m, registers, sequencer.rejected, sequencer.completed, out=self.rejected)
        # a pick goes to both the weights and the fetch list; each side's valid waits for the
        # other's ready (neither ready depends on valid, so this cannot deadlock)
        pick = selector.pick
        m.d.comb += [renorm.pick.payload.eq(pick.payload), fetch.pick.payload.eq(pick.payload),
                     renorm.pick.valid.eq(pick.valid & fetch.pick.ready),
                     fetch.pick.valid.eq(pick.valid & renorm.pick.ready),
                     pick.ready.eq(renorm.pick.ready & fetch.pick.ready)]
        return m
