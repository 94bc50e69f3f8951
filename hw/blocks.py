"""The registry of hardware blocks the CLI and the flows know by name.

A block is built from the validated hardware configuration, so `edgexpert rtl`, `edgexpert synth`
and the cocotb benches all elaborate exactly the same RTL for the same config.

For the cost flow (`edgexpert synth`, docs/synthesis.md) a block also names its stimulus: a
function from the whole configuration to an `edgexpert.sim.stimulus.Stimulus`, which says what one
operation of the block is (a MAC, a byte fetched, a coalescing decision) and drives the block in
simulation for the switching activity behind its power and energy per operation. A block without
one is still synthesized and timed; its report says that power was not measured.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from ..config import Config, ConfigError, HardwareConfig
from ..sim.stimulus import Stimulus, mac_lane_stimulus
from .mac_lane import MacLane

__all__ = ["Block", "BLOCKS", "get_block"]


@dataclass(frozen=True)
class Block:
    name: str
    description: str
    build: Callable[[HardwareConfig], object]
    parameters: Callable[[HardwareConfig], dict]
    stimulus: Callable[[Config], Stimulus] | None = None


BLOCKS: dict[str, Block] = {
    "mac_lane": Block(
        "mac_lane",
        "stream-fed A8W4 dot-product lane (int8 x int4, int32 accumulate)",
        lambda hw: MacLane(hw.mac_lane.pairs_per_beat),
        lambda hw: {"pairs_per_beat": hw.mac_lane.pairs_per_beat},
        mac_lane_stimulus,
    ),
}


def get_block(name: str) -> Block:
    try:
        return BLOCKS[name]
    except KeyError:
        raise ConfigError(f"block {name!r} is not known: accepted {', '.join(sorted(BLOCKS))}") from None
