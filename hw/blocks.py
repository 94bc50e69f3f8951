"""The registry of hardware blocks the CLI and the flows know by name.

A block is built from the validated hardware configuration, so `edgexpert rtl`, `edgexpert synth`
and the cocotb benches all elaborate exactly the same RTL for the same config.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from ..config import ConfigError, HardwareConfig
from .mac_lane import MacLane

__all__ = ["Block", "BLOCKS", "get_block"]


@dataclass(frozen=True)
class Block:
    name: str
    description: str
    build: Callable[[HardwareConfig], object]
    parameters: Callable[[HardwareConfig], dict]


BLOCKS: dict[str, Block] = {
    "mac_lane": Block(
        "mac_lane",
        "stream-fed A8W4 dot-product lane (int8 x int4, int32 accumulate)",
        lambda hw: MacLane(hw.mac_lane.pairs_per_beat),
        lambda hw: {"pairs_per_beat": hw.mac_lane.pairs_per_beat},
    ),
}


def get_block(name: str) -> Block:
    try:
        return BLOCKS[name]
    except KeyError:
        raise ConfigError(f"block {name!r} is not known: accepted {', '.join(sorted(BLOCKS))}") from None
