"""The DCU feeding the EMA: what the chained bench simulates."""

from __future__ import annotations

from amaranth.hdl import Module
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In

from ...contracts.dcu import dcu_data_layout, dcu_route_layout
from ...contracts.weight_layout import WeightLayout
from ..ema import EmaSystem
from ..streams import bring_out
from .top import Dcu

__all__ = ["DcuEma"]


class DcuEma(wiring.Component):
    """`Dcu` with its `cmd` stream into an `EmaSystem`'s: jobs in on `route` and `data`, and the
    EMA system's other ports (`done`, `m_axi`, `csr`, `buf_rd`, `loc_rd`, `res_rd`) as they
    are. `dcu` and `ema` are the two parts' keyword arguments."""

    def __init__(self, layout: WeightLayout, dcu: dict, ema: dict):
        self._dcu = Dcu(**dcu)
        self._ema = EmaSystem(layout, **ema)
        members = {"route": In(stream.Signature(dcu_route_layout)),
                   "data": In(stream.Signature(dcu_data_layout))}
        members.update({name: member for name, member in self._ema.signature.members.items()
                        if name != "cmd"})
        super().__init__(members)

    def elaborate(self, platform):
        m = Module()
        m.submodules.dcu = dcu = self._dcu
        m.submodules.ema = ema = self._ema
        wiring.connect(m, wiring.flipped(self.route), dcu.route)
        wiring.connect(m, wiring.flipped(self.data), dcu.data)
        wiring.connect(m, dcu.cmd, ema.cmd)
        for name in self._ema.signature.members:
            if name == "cmd":
                continue
            bring_out(m, getattr(self, name), getattr(ema, name))
        return m
