"""AXI4 signatures, from the master's side.

Members are flat (`araddr`, not `ar.addr`) so that a port `m_axi` flattens to `m_axi__araddr`,
which is what cocotbext-axi's `AxiBus.from_prefix(dut, "m_axi_")` looks for. A master built from
parts gives each part the channel it drives (`AxiReadAddressSignature` to the part that issues
bursts, `AxiReadDataSignature` to the part that takes beats) and joins them to its own port with
`forward`.
"""

from amaranth.hdl import Module
from amaranth.lib import enum, wiring
from amaranth.lib.wiring import In, Out

__all__ = ["AxiBurst", "AxiResp", "AxiReadAddressSignature", "AxiReadDataSignature",
           "Axi4ReadSignature", "Axi4WriteSignature", "Axi4Signature", "forward"]


class AxiBurst(enum.Enum, shape=2):
    """ARBURST / AWBURST (AMBA AXI spec, A3.4.1)."""
    FIXED = 0
    INCR = 1
    WRAP = 2


class AxiResp(enum.Enum, shape=2):
    """RRESP / BRESP (AMBA AXI spec, A3.4.4): the high bit set is an error."""
    OKAY = 0
    EXOKAY = 1
    SLVERR = 2
    DECERR = 3


def _check(**widths):
    for name, value in widths.items():
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise TypeError(f"{name} must be a positive integer, not {value!r}")


class AxiReadAddressSignature(wiring.Signature):
    """The AR channel."""
    def __init__(self, addr_width: int, id_width: int):
        _check(addr_width=addr_width, id_width=id_width)
        super().__init__({
            "arid": Out(id_width), "araddr": Out(addr_width), "arlen": Out(8), "arsize": Out(3),
            "arburst": Out(AxiBurst), "arvalid": Out(1), "arready": In(1),
        })


class AxiReadDataSignature(wiring.Signature):
    """The R channel."""
    def __init__(self, data_width: int, id_width: int):
        _check(data_width=data_width, id_width=id_width)
        super().__init__({
            "rid": In(id_width), "rdata": In(data_width), "rresp": In(AxiResp), "rlast": In(1),
            "rvalid": In(1), "rready": Out(1),
        })


class Axi4ReadSignature(wiring.Signature):
    """AR and R: a read-only master."""
    def __init__(self, addr_width: int, data_width: int, id_width: int):
        super().__init__({**AxiReadAddressSignature(addr_width, id_width).members,
                          **AxiReadDataSignature(data_width, id_width).members})


class Axi4WriteSignature(wiring.Signature):
    """AW, W and B."""
    def __init__(self, addr_width: int, data_width: int, id_width: int):
        _check(addr_width=addr_width, data_width=data_width, id_width=id_width)
        super().__init__({
            "awid": Out(id_width), "awaddr": Out(addr_width), "awlen": Out(8), "awsize": Out(3),
            "awburst": Out(2), "awvalid": Out(1), "awready": In(1),
            "wdata": Out(data_width), "wstrb": Out(data_width // 8), "wlast": Out(1),
            "wvalid": Out(1), "wready": In(1),
            "bid": In(id_width), "bresp": In(2), "bvalid": In(1), "bready": Out(1),
        })


class Axi4Signature(wiring.Signature):
    """Both halves: what an AXI4 slave model (cocotbext-axi `AxiRam`) attaches to."""
    def __init__(self, addr_width: int, data_width: int, id_width: int):
        super().__init__({**Axi4ReadSignature(addr_width, data_width, id_width).members,
                          **Axi4WriteSignature(addr_width, data_width, id_width).members})


def forward(m: Module, outer, inner):
    """Join every member of `inner` (a port of a submodule, a master's channels) to the member of
    the same name of `outer` (the enclosing component's own master port, which may have more):
    what the submodule drives goes out, the rest comes in. `wiring.connect` cannot do this: it
    joins two whole interfaces of one signature."""
    for name, member in inner.signature.members.items():
        if member.flow == Out:
            m.d.comb += getattr(outer, name).eq(getattr(inner, name))
        else:
            m.d.comb += getattr(inner, name).eq(getattr(outer, name))
