"""The PRU feeding the EMA: what the chained bench simulates (cocotb_tests/pru/chain.py)."""

from __future__ import annotations

from amaranth.hdl import Module
from amaranth.lib import wiring

from ...contracts.weight_layout import WeightLayout
from ..ema import EmaSystem
from ..streams import bring_out
from .params import PruParams
from .top import Pru

__all__ = ["PruEma"]

#: the PRU's ports renamed outside, where the EMA system's take their names
PRU_NAMES = {"csr": "pru_csr"}


class PruEma(wiring.Component):
    """`Pru` with its `cmd` stream into an `EmaSystem`'s `cmd`: scores and logits in on
    `score` and `logit`, routes out on `route`, its `rejected` and its register port as
    `pru_csr`, and the EMA system's other ports (`done`, `m_axi`, `csr`, `buf_rd`, `loc_rd`,
    `res_rd`) as they are. `ema`: the EMA system's keyword arguments."""

    def __init__(self, params: PruParams, layout: WeightLayout, ema: dict):
        self._pru = Pru(params)
        self._ema = EmaSystem(layout, **ema)
        members = {PRU_NAMES.get(name, name): member
                   for name, member in self._pru.signature.members.items() if name != "cmd"}
        members.update({name: member for name, member in self._ema.signature.members.items()
                        if name != "cmd"})
        super().__init__(members)

    def elaborate(self, platform):
        m = Module()
        m.submodules.pru = pru = self._pru
        m.submodules.ema = ema = self._ema
        wiring.connect(m, pru.cmd, ema.cmd)
        for part, skip in ((pru, "cmd"), (ema, "cmd")):
            for name in part.signature.members:
                if name == skip:
                    continue
                outer = getattr(self, PRU_NAMES.get(name, name) if part is pru else name)
                bring_out(m, outer, getattr(part, name))
        return m
