# amaranth: UnusedElaboratable=no
# (constructors rejected on purpose leave their component unused)
"""EMA controller in Amaranth's simulator: AR addresses equal `WeightLayout`'s, buffer bytes equal
the memory image, locations and residency equal the reference model; parameter validation.

The cocotb bench (cocotb_tests/ema/) adds backpressure, latency, errors and resets on Icarus and
Verilator; this test is the quick check of the address generator against the layout contract.
"""

import itertools
import random
from collections import deque

import pytest
from amaranth.sim import Simulator

from edgexpert.contracts.ema import Descriptor, encode_step
from edgexpert.golden.blocks.ema import SCALE, EmaReference, split_bursts
from edgexpert.hw.ema import EmaController, EmaSystem
from edgexpert.contracts.ema import EmaCsr, EmaStatus
from edgexpert.contracts.weight_image import memory_image, random_weights
from edgexpert.contracts.weight_layout import Matrix, WeightLayout, channel_runs

# F = 40: a GATE_UP column is 40 bytes in a 64-byte stride, so reads carry padding between
# neighbours and end mid-stride; the layout spans several 4 KB pages
LAYOUT = WeightLayout(n_layers=2, n_experts=3, d_model=48, expert_ffn=40, n_shared_experts=1,
                      base_address=0x2000)


def run_system(system: EmaSystem, commands: list[int], image: bytes, base: int, latency: int = 3,
               seen: dict | None = None):
    """Drive `commands`, serve AXI reads from `image` (in order, `latency` cycles after the AR),
    and return (ARs, completions, buffer lines, csr values, location and residency readers).
    `seen`, if given, gets per cycle the early starts and the writes: `issued` (cycle, tag,
    slot, status), `loc_writes` and `line_writes` (cycle, line), `filled` (its value)."""
    g = system.geometry
    B = g.beat_bytes
    ars, done = [], []
    out = {}
    if seen is not None:
        seen.update(issued=[], loc_writes=[], line_writes=[], filled=[])

    async def tb(ctx):
        pending = deque()       # [ready_cycle, address, beats left]
        cmds = deque(commands)
        cycle = 0
        quiet = 0
        while quiet < 40:
            cycle += 1
            ctx.set(system.cmd.valid, bool(cmds))
            if cmds:
                ctx.set(system.cmd.payload.as_value(), cmds[0])
            ctx.set(system.m_axi.arready, 1)
            ctx.set(system.done.ready, 1)
            beat = None
            if pending and pending[0][0] <= cycle:
                at, left = pending[0][1], pending[0][2]
                beat = (int.from_bytes(image[at - base:at - base + B], "little"), left == 1)
            ctx.set(system.m_axi.rvalid, beat is not None)
            if beat:
                ctx.set(system.m_axi.rdata, beat[0])
                ctx.set(system.m_axi.rlast, beat[1])
            moved = False
            if ctx.get(system.cmd.ready) and cmds:
                cmds.popleft()
                moved = True
            if ctx.get(system.m_axi.arvalid):
                addr, n = ctx.get(system.m_axi.araddr), ctx.get(system.m_axi.arlen) + 1
                ars.append((addr, n))
                pending.append([cycle + latency, addr, n])
                moved = True
            if beat and ctx.get(system.m_axi.rready):
                pending[0][1] += B
                pending[0][2] -= 1
                if pending[0][2] == 0:
                    pending.popleft()
                moved = True
            if ctx.get(system.done.valid):
                c = ctx.get(system.done.payload)
                done.append((c.tag, c.slot, c.status))
                moved = True
            if seen is not None:
                if ctx.get(system.issued.valid):
                    i = ctx.get(system.issued.payload)
                    seen["issued"].append((cycle, i.tag, i.slot, i.status))
                if ctx.get(system.loc_wr.en):
                    seen["loc_writes"].append(cycle)
                if ctx.get(system.buf_wr.en):
                    seen["line_writes"].append((cycle, ctx.get(system.buf_wr.addr)))
                seen["filled"].append(ctx.get(system.filled))
            quiet = 0 if moved or pending or cmds else quiet + 1
            await ctx.tick()
        ctx.set(system.cmd.valid, 0)
        ctx.set(system.m_axi.rvalid, 0)

        async def read(port, addr):
            ctx.set(port.addr, addr)
            await ctx.tick()
            return ctx.get(port.data)
        banks = system.buffer_banks
        out["lines"] = {}
        for line in range(g.lines):
            word = await read(system.buf_rd[line % banks], line // banks)
            out["lines"][line] = word.to_bytes(B, "little")
        out["csr"] = {r: await read(system.csr, r.value) for r in EmaCsr}
        out["loc"] = {}
        for entry in range(system.slots_entries):
            out["loc"][entry] = await read(system.loc_rd[0], entry)
        out["res"] = {}
        for word in range(system.controller.slots * g.res_words_per_slot):
            out["res"][word] = await read(system.res_rd, word)

    sim = Simulator(system)
    sim.add_clock(1e-8)
    sim.add_testbench(tb)
    sim.run()
    return ars, done, out


def descriptors_for(rng: random.Random, count: int) -> list[Descriptor]:
    out = []
    for tag in range(count):
        matrix = rng.choice(list(Matrix))
        n = LAYOUT.in_channels(matrix)
        kind = rng.choice(["dense", "runs", "sparse", "empty"])
        if kind == "dense":
            channels = range(n)
        elif kind == "empty":
            channels = []
        elif kind == "sparse":
            channels = [c for c in range(n) if rng.random() < 0.3]
        else:
            start = rng.randrange(n)
            channels = range(start, min(n, start + rng.randint(1, 40)))
        out.append(Descriptor(tag, rng.randrange(LAYOUT.n_layers),
                              rng.randrange(LAYOUT.experts_per_layer), matrix, channels,
                              scales=rng.random() < 0.5))
    return out


def fetches(step: list[Descriptor]):
    """Per descriptor of a step, what the contract says the EMA reads for it: (descriptor,
    whether it reads the scale block, the channels it fetches, sorted): a matrix's scale block
    once a step, a channel once a step."""
    seen, scaled = {}, set()
    for d in step:
        key = (d.layer, d.expert, d.matrix)
        scale = d.scales and key not in scaled
        if scale:
            scaled.add(key)
        fetch = sorted(d.channels - seen.setdefault(key, set()))
        seen[key] |= d.channels
        yield d, scale, fetch


@pytest.mark.parametrize("data_width, banks", [(64, 2), (256, 4)])
def test_addresses_buffer_and_locations_match_the_layout(data_width, banks):
    rng = random.Random(7 + data_width)
    system = EmaSystem(LAYOUT, data_width=data_width, outstanding=3, buffer_bytes=16384,
                       buffer_banks=banks, slots=6)
    g = system.geometry
    weights = random_weights(LAYOUT, seed=3)
    image = memory_image(LAYOUT, weights, junk_seed=4)
    # two steps: the second repeats matrices of the first (no residency carries over) and
    # repeats its own, which must be de-duplicated
    step1 = descriptors_for(rng, 6)
    step2 = descriptors_for(rng, 4)
    step2 = step2 + [Descriptor(40 + i, d.layer, d.expert, d.matrix,
                                [c for c in range(LAYOUT.in_channels(d.matrix)) if c % 3], True)
                     for i, d in enumerate(step2[:2])]
    ref = EmaReference(LAYOUT, data_width // 8, 16384, 6)
    r1, r2 = ref.step(step1), ref.step(step2)
    commands = encode_step(LAYOUT, step1) + encode_step(LAYOUT, step2)
    ars, done, out = run_system(system, commands, image, LAYOUT.base_address)

    # every AR is the layout's column run (or scale block), split at 4 KB and 256 beats
    expected_ars = []
    for step in (step1, step2):
        for d, scale, fetch in fetches(step):
            if scale:
                expected_ars += split_bursts(LAYOUT.block_address(d.layer, d.expert, d.matrix),
                                             g.scale_beats(d.matrix), g.beat_bytes)
            for burst in LAYOUT.bursts(d.layer, d.expert, d.matrix, fetch):
                expected_ars += split_bursts(burst.address, -(-burst.length // g.beat_bytes),
                                             g.beat_bytes)
    assert ars == expected_ars
    assert all(a // 4096 == (a + n * g.beat_bytes - 1) // 4096 and n <= 256 for a, n in ars)
    assert done == [(c.tag, c.slot, c.status) for c in r1.completions + r2.completions]

    # the buffer after step 2: its lines from step 2, the rest still from step 1
    lines = ref.buffer_lines(r1, image, LAYOUT.base_address)
    lines.update(ref.buffer_lines(r2, image, LAYOUT.base_address))
    for line, want in lines.items():
        assert out["lines"][line] == want, f"buffer line {line}"
    # locations and residency of step 2
    for (slot, channel), line in r2.locations.items():
        index = g.scale_entry if channel == SCALE else channel
        assert out["loc"][slot * g.chan_stride + index] == line, (slot, channel)
    for slot, channels in r2.resident.items():
        for word in range(g.res_words_per_slot):
            want = sum(1 << (c - 32 * word) for c in channels if 32 * word <= c < 32 * word + 32)
            assert out["res"][slot * g.res_words_per_slot + word] == want

    csr = out["csr"]
    assert csr[EmaCsr.STATUS] == 0
    assert csr[EmaCsr.BURSTS] == len(ars)
    assert csr[EmaCsr.BEATS] == sum(n for _, n in ars)
    assert csr[EmaCsr.BYTES] == csr[EmaCsr.BEATS] * g.beat_bytes
    assert csr[EmaCsr.DESCRIPTORS] == len(done)
    assert csr[EmaCsr.FETCHED_CHANNELS] == r1.fetched_channels + r2.fetched_channels
    assert csr[EmaCsr.SKIPPED_CHANNELS] == r1.skipped_channels + r2.skipped_channels > 0
    assert 1 <= csr[EmaCsr.PEAK_OUTSTANDING] <= 3


@pytest.mark.parametrize("latency", [3, 40])
def test_early_starts_announce_only_what_is_written(latency):
    """`issued` pulses once per descriptor, in command order, with its completion's tag, slot
    and status, after exactly its own and earlier descriptors' location entries are written;
    `filled` never passes a line not yet written this step, never falls within it, and ends
    at every line the step wrote. One step per run (the top sends NEW_STEP only once the
    step before is consumed, the rule `filled` relies on)."""
    rng = random.Random(11 + latency)
    for steps in range(3):
        system = EmaSystem(LAYOUT, data_width=64, outstanding=3, buffer_bytes=16384,
                           buffer_banks=2, slots=6)
        g = system.geometry
        image = memory_image(LAYOUT, random_weights(LAYOUT, seed=3), junk_seed=4)
        step = descriptors_for(rng, 6)
        ref = EmaReference(LAYOUT, g.beat_bytes, 16384, 6).step(step)
        seen = {}
        _, done, _ = run_system(system, encode_step(LAYOUT, step), image, LAYOUT.base_address,
                                latency, seen)
        assert [i[1:] for i in seen["issued"]] == done
        # each descriptor's entries: the channels it fetches, and its scale block if it reads it
        entries = [len(fetch) + scale for _, scale, fetch in fetches(step)]
        before = [sum(1 for c in seen["loc_writes"] if c < cycle) for cycle, *_ in seen["issued"]]
        assert before == list(itertools.accumulate(entries))
        assert len(seen["loc_writes"]) == len(ref.locations) == sum(entries)
        # filled: a line below it was written in an earlier cycle
        written_at = {}
        for cycle, line in seen["line_writes"]:
            written_at.setdefault(line, cycle)
        for cycle, filled in enumerate(seen["filled"], start=1):
            assert all(written_at.get(line, cycle) < cycle for line in range(filled)), cycle
        assert seen["filled"] == sorted(seen["filled"])
        assert seen["filled"][-1] == len(written_at) == max(written_at) + 1


def test_runs_merge_across_mask_words():
    # channels 20..70 span three mask words: one read, not three
    assert channel_runs(range(20, 71)) == [(20, 51)]
    system = EmaSystem(LAYOUT, data_width=128, outstanding=2, buffer_bytes=8192,
                       buffer_banks=1, slots=2)
    d = Descriptor(9, 1, 2, Matrix.GATE_UP, list(range(20, 48)) + [0, 1, 31, 32, 33])
    image = memory_image(LAYOUT, random_weights(LAYOUT, seed=1))
    ars, done, _ = run_system(system, encode_step(LAYOUT, [d]), image, LAYOUT.base_address)
    col = LAYOUT.column_address
    assert [a for a, _ in ars] == [col(1, 2, Matrix.GATE_UP, 0), col(1, 2, Matrix.GATE_UP, 20)]
    assert done == [(9, 0, EmaStatus.OK)]


@pytest.mark.parametrize("kwargs, error, message", [
    ({"data_width": 100}, ValueError, "data_width must be one of 64, 128, 256, not 100"),
    ({"outstanding": 0}, ValueError, "outstanding must be an integer in 1..64, not 0"),
    ({"slots": 129}, ValueError, "slots must be an integer in 1..128, not 129"),
    ({"buffer_bytes": 3000}, ValueError, "buffer_bytes must be a power of two in 1024..1048576"),
    ({"addr_width": 14}, ValueError, "addr_width must be an integer in 16..64, not 14"),
])
def test_bad_parameters_name_the_accepted_range(kwargs, error, message):
    with pytest.raises(error, match=message):
        EmaController(LAYOUT, **kwargs)


def test_address_width_must_reach_the_weights():
    big = WeightLayout(n_layers=4, n_experts=32, d_model=192, expert_ffn=96)
    with pytest.raises(ValueError, match=r"addr_width 16 does not reach the end of the weights "
                                         r"\(0x378000\): accepted 22..64"):
        EmaController(big, addr_width=16)
    with pytest.raises(ValueError, match="buffer_banks must be one of 1, 2, 4, 8, not 3"):
        EmaSystem(LAYOUT, buffer_banks=3)
    with pytest.raises(TypeError, match="layout must be a WeightLayout"):
        EmaController({"d_model": 64})


def test_descriptor_fields_are_checked_before_encoding():
    with pytest.raises(ValueError, match="layer 2 is out of range: accepted 0..1"):
        encode_step(LAYOUT, [Descriptor(0, 2, 0, Matrix.DOWN, [0])])
    with pytest.raises(ValueError, match="expert 4 is out of range: accepted 0..3"):
        encode_step(LAYOUT, [Descriptor(0, 0, 4, Matrix.DOWN, [0])])
    with pytest.raises(ValueError, match="channel 40 of DOWN is out of range: accepted 0..39"):
        encode_step(LAYOUT, [Descriptor(0, 0, 0, Matrix.DOWN, [0, 40])])
    with pytest.raises(ValueError, match="descriptor tag 256 is out of range: accepted 0..255"):
        encode_step(LAYOUT, [Descriptor(256, 0, 0, Matrix.DOWN, [0])])
