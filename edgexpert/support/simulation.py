"""Amaranth-simulator testbenches shared by the tests (tests/): a stream source with random
pauses."""

import random


def paused_source(port, items, rng: random.Random, pause: float):
    """A testbench offering `items` on the stream `port` in order, each held until taken,
    with a pause of a cycle before an item with probability `pause` (repeatedly)."""
    async def source(ctx):
        for item in items:
            while rng.random() < pause:
                ctx.set(port.valid, 0)
                await ctx.tick()
            ctx.set(port.valid, 1)
            ctx.set(port.payload.as_value(), item)
            await ctx.tick().until(port.ready)
        ctx.set(port.valid, 0)
    return source
