"""AXI4 signatures, from the master's side.

Members are flat (`araddr`, not `ar.addr`) so that a port `m_axi` flattens to `m_axi__araddr`,
which is what cocotbext-axi's `AxiBus.from_prefix(dut, "m_axi_")` looks for.
"""

from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

__all__ = ["AXI_BURST_INCR", "AXI_RESP_SLVERR", "AXI_RESP_DECERR", "axi4_read_signature",
           "axi4_write_signature", "axi4_signature"]

AXI_BURST_INCR = 1
AXI_RESP_SLVERR = 2
AXI_RESP_DECERR = 3


def axi4_read_signature(addr_width: int, data_width: int, id_width: int) -> wiring.Signature:
    return wiring.Signature({
        "arid": Out(id_width), "araddr": Out(addr_width), "arlen": Out(8), "arsize": Out(3),
        "arburst": Out(2), "arvalid": Out(1), "arready": In(1),
        "rid": In(id_width), "rdata": In(data_width), "rresp": In(2), "rlast": In(1),
        "rvalid": In(1), "rready": Out(1),
    })


def axi4_write_signature(addr_width: int, data_width: int, id_width: int) -> wiring.Signature:
    return wiring.Signature({
        "awid": Out(id_width), "awaddr": Out(addr_width), "awlen": Out(8), "awsize": Out(3),
        "awburst": Out(2), "awvalid": Out(1), "awready": In(1),
        "wdata": Out(data_width), "wstrb": Out(data_width // 8), "wlast": Out(1),
        "wvalid": Out(1), "wready": In(1),
        "bid": In(id_width), "bresp": In(2), "bvalid": In(1), "bready": Out(1),
    })


def axi4_signature(addr_width: int, data_width: int, id_width: int) -> wiring.Signature:
    """Both halves: what an AXI4 slave model (cocotbext-axi `AxiRam`) attaches to."""
    members = dict(axi4_read_signature(addr_width, data_width, id_width).members)
    members.update(axi4_write_signature(addr_width, data_width, id_width).members)
    return wiring.Signature(members)
