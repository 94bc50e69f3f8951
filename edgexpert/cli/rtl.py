"""`rtl`: a block's RTLIL and Verilog."""

from __future__ import annotations

from pathlib import Path

from .common import load, settings_options

__all__ = ["register"]


def cmd_rtl(args) -> int:
    from ..blocks import get_block
    from ..hw.emit import emit_rtl
    from ..support.progress import phases
    config = load(args)
    block = get_block(args.block)
    with phases(f"rtl {block.name}", 2) as phase:
        phase("constructing the block at the configuration's parameters")
        component = block.build(config)
        phase("elaborating; RTLIL and Verilog (Amaranth), the simulation Verilog (Yosys)")
        files = emit_rtl(component, block.name, Path(args.out))
    for kind, path in [("rtlil", files.rtlil), ("verilog", files.verilog),
                       ("simulation verilog", files.sim_verilog)]:
        print(f"{kind:<19} {path}")
    return 0


def register(sub) -> None:
    from ..blocks import BLOCKS
    blocks = ", ".join(sorted(BLOCKS))
    p = sub.add_parser("rtl", parents=[settings_options()], help="write a block's RTLIL and Verilog")
    p.add_argument("block", metavar="BLOCK", help=f"one of: {blocks}")
    p.add_argument("--out", required=True, metavar="DIR", help="output folder")
    p.set_defaults(func=cmd_rtl)
