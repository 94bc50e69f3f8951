"""The prompt routing unit: its stages joined by streams."""

from __future__ import annotations

from amaranth.hdl import Module
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from ...contracts.ema import ema_command_layout
from .classifier import Classifier
from .fetch import FetchList
from .params import PruParams
from .renorm import Renormalizer
from .selector import Selector
from .sequencer import Sequencer

__all__ = ["Pru"]


class Pru(wiring.Component):
    """Scores and router logits in, routes and fetch commands out (hw/pru/__init__.py)."""
    def __init__(self, params: PruParams):
        if not isinstance(params, PruParams):
            raise TypeError(f"params must be a PruParams, not {params!r}")
        self._p = params
        super().__init__({"i_score": In(stream.Signature(params.score_layout)),
                          "i_logit": In(stream.Signature(params.logit_layout)),
                          "o_route": Out(stream.Signature(params.route_layout)),
                          "o_ema": Out(stream.Signature(ema_command_layout))})

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
        wiring.connect(m, wiring.flipped(self.i_score), classifier.i_score)
        wiring.connect(m, classifier.o_class, sequencer.i_class)
        wiring.connect(m, sequencer.o_job, selector.i_job)
        wiring.connect(m, wiring.flipped(self.i_logit), selector.i_logit)
        wiring.connect(m, renorm.o_route, wiring.flipped(self.o_route))
        wiring.connect(m, fetch.o_ema, wiring.flipped(self.o_ema))
        # a pick goes to both the weights and the fetch list; each side's valid waits for the
        # other's ready (neither ready depends on valid, so this cannot deadlock)
        pick = selector.o_pick
        m.d.comb += [renorm.i_pick.payload.eq(pick.payload), fetch.i_pick.payload.eq(pick.payload),
                     renorm.i_pick.valid.eq(pick.valid & fetch.i_pick.ready),
                     fetch.i_pick.valid.eq(pick.valid & renorm.i_pick.ready),
                     pick.ready.eq(renorm.i_pick.ready & fetch.i_pick.ready)]
        return m
