"""The top's command path checks (hw/top/command.py, `Dispatcher`) in Amaranth's simulator, in
front of a small expert engine as in the top: bad beats of every `TopError` between good groups.
Each bad beat is reported (code, op) in order, COMMAND_STATUS names the first and
COMMAND_REJECTED counts them (read through `TopRegisters`, as the top's `csr`), nothing hangs,
and every good group's outputs, and the groups' whose bad CAND was neutralized, are golden's
bit for bit (docs/contracts.md, "The top's commands: accepted ranges")."""

import random
from collections import deque

import numpy as np
import pytest
import torch
from amaranth.hdl import Module
from amaranth.lib.wiring import connect
from amaranth.sim import Simulator

from edgexpert.cocotb_tests.engine.host import (OUTPUTS, group_items, group_outputs, layouts,
                                                moe_items, scale_words, unpack)
from edgexpert.golden.integer.int_model import IntModel, image_weights
from edgexpert.contracts.top import (OP_BITS, TopCsr, TopError, TopOp, cand_item, flush_item,
                                     top_status_layout, x_item)
from edgexpert.contracts.weight_image import ExpertWeights, memory_image
from edgexpert.contracts.weight_layout import WeightLayout
from edgexpert.golden.integer.intops import I64, Dyadic, rshift
from edgexpert.hw.engine import ExpertEngine
from edgexpert.hw.rejects import RejectRegisters, report
from edgexpert.hw.top import command_layout
from edgexpert.hw.top.command import Dispatcher
from edgexpert.hw.top.feedback import CandidateTap, MaskSource
from edgexpert.hw.top.layouts import host_cand_layout
from edgexpert.hw.top.registers import TopRegisters

#: the smallest engine with every check reachable: 3 token slots (a 2-bit slot field, so slot 3
#: is out of range), groups of 2, d_model 8 in one X beat of 8 inputs (a 1-bit beat field, so
#: beat 1 is out of range)
D, F, CANDS, LANES, WORD, TOKENS = 8, 8, 2, 16, 64, 3
WEIGHT_PORTS = ("gate_up", "gate_up_scales", "down", "down_scales")


def build():
    disp = Dispatcher(TOKENS, CANDS, D, F, WORD)
    engine = ExpertEngine(D, F, CANDS, LANES, WORD, TOKENS)
    checks = RejectRegisters(TopError, OP_BITS)
    regs = TopRegisters()
    m = Module()
    m.submodules.disp, m.submodules.engine = disp, engine
    m.submodules.checks, m.submodules.regs = checks, regs
    for name in ("x", "flush"):
        connect(m, getattr(disp, name), getattr(engine, name))
    # the candidates and their masks to the engine as the top's DCU path gives a host group's
    # (no DCU part here; none of the tap's other outputs is read)
    m.submodules.tap = tap = CandidateTap(TOKENS, F)
    connect(m, disp.cand, tap.cand)
    connect(m, tap.engine, engine.cand)
    for name, channels, host in (("gate_up", D, False), ("down", F, True)):
        source = m.submodules[f"{name}_masks"] = MaskSource(channels, host_mask=host)
        connect(m, getattr(tap, f"{name}_tickets"), source.tickets)
        connect(m, source.mask, getattr(engine, f"{name}_mask"))
    m.d.comb += [port.ready.eq(1) for port in (tap.weights, tap.marks, tap.groups)]
    report(m, checks, disp.rejected, disp.passed)
    connect(m, regs.command, checks.csr)
    return m, disp, engine, regs


class Script:
    """Command beats, the engine's weight items, the outputs expected (None: not compared, a
    group whose outputs are not meaningful) and the rejections expected, in order."""

    def __init__(self, seed: int):
        self.rng = np.random.default_rng(seed)
        self.layout = WeightLayout(n_layers=1, n_experts=3, d_model=D, expert_ffn=F)
        self.weights = {(0, e): ExpertWeights(
            gate=self.rng.integers(-8, 8, (F, D), dtype=np.int8),
            up=self.rng.integers(-8, 8, (F, D), dtype=np.int8),
            down=self.rng.integers(-8, 8, (D, F), dtype=np.int8),
            scales_gate_up=scale_words(self.rng, 2 * F), scales_down=scale_words(self.rng, D))
            for e in range(3)}
        self.image = memory_image(self.layout, self.weights, junk_seed=seed)
        self.lay = command_layout(TOKENS, CANDS, D, WORD, expert_ffn=F)
        self.eng = layouts(D, F, CANDS, WORD, TOKENS)
        self.beats, self.rejects = [], []
        self.weight_items = {name: [] for name in WEIGHT_PORTS}
        self.want = {name: [] for name in OUTPUTS}
        self.moe = np.zeros((TOKENS, D), dtype=np.int64)

    def beat(self, op: int, arg_bits: int = 0, reject: TopError | None = None, tag=None):
        self.beats.append(op << self.lay["op"].offset | arg_bits << self.lay["arg"].offset)
        if reject is not None:
            self.rejects.append((reject, int(op if tag is None else tag)))

    def cand(self, fields: dict, reject: TopError | None = None):
        self.beat(TopOp.CAND, host_cand_layout(TOKENS, F).const(fields).as_bits(), reject)

    def x(self, fields: dict, reject: TopError | None = None, tag=None):
        self.beat(TopOp.X, self.eng["x"].const(fields).as_bits(), reject, tag)

    def group(self, expert: int, slots: list[int], weights: list[int], exact: bool = True):
        """A group's weight items and its expected outputs (golden's: a CAND the command path
        neutralizes weighs 0; `exact` False: its outputs are counted, not compared); returns
        its CAND and X fields for the caller to send (good or spoiled)."""
        n = len(slots)
        x8 = torch.from_numpy(self.rng.integers(-127, 128, (n, D))).to(I64)
        sx = Dyadic(torch.from_numpy(self.rng.integers(8192, 32768, n)).to(I64),
                    torch.from_numpy(self.rng.integers(24, 30, n)).to(I64))
        every = np.ones(D, dtype=bool), np.ones(F, dtype=bool)
        items = group_items(self.layout, self.image, 0, expert, x8.numpy(), sx.m.numpy(),
                            sx.e.numpy(), [0] * n, [0] * n, candidates=CANDS, word_bits=WORD,
                            token_slots=TOKENS)
        for name in WEIGHT_PORTS:
            self.weight_items[name] += items[name]
        y, h8, sh = IntModel.expert(x8, sx, *image_weights(self.weights[0, expert]), *every)
        for name, outs in group_outputs(h8, sh.m, sh.e, y).items():
            self.want[name] += outs if exact else [None] * len(outs)
        for c in range(n):
            if exact and slots[c] < TOKENS and weights[c] <= 65536:
                self.moe[slots[c]] += rshift(y[c] * weights[c], 16).numpy()
        cands = [{"x": {"m": int(sx.m[c]), "e": int(sx.e[c])}, "token": slots[c],
                  "weight": weights[c], "down": (1 << F) - 1, "last": int(c == n - 1)}
                 for c in range(n)]
        xs = [{"candidate": c, "beat": 0, "values": x8[c].tolist(), "last": int(c == n - 1)}
              for c in range(n)]
        return cands, xs

    def send_good(self, cands, xs):
        for f in cands:
            self.cand(cand_item(f["x"]["m"], f["x"]["e"], f["token"], f["weight"], f["last"],
                                TOKENS, F))
        for f in xs:
            self.x(x_item(f["candidate"], f["beat"], f["values"], f["last"], len(cands), D,
                          WORD))

    def flush(self, slot: int, exact: bool = True):
        self.beat(TopOp.FLUSH, self.eng["flush"].const(flush_item(slot, TOKENS)).as_bits())
        items = moe_items(slot, self.moe[slot], WORD)
        self.want["moe_out"] += items if exact else [None] * len(items)
        self.moe[slot] = 0


def bad_script(seed: int) -> Script:
    s = Script(seed)
    # ops the instance does not have (no PRU: SCORE too), a FLUSH of slot 3, an X with no group
    for op in (7, 12, TopOp.SCORE):
        s.beat(op, 0x5A5, TopError.OP)
    s.beat(TopOp.FLUSH, s.eng["flush"].const({"token": 3}).as_bits(), TopError.TOKEN)
    s.x({"candidate": 0, "beat": 0, "values": [1] * 8, "last": 1}, TopError.CANDIDATE)
    s.send_good(*s.group(0, [0, 1], [40000, 65536]))
    # a CAND of slot 3 and one of weight 65537: each goes on weighing 0, the group exact
    cands, xs = s.group(1, [3, 0], [30000, 20000])
    s.cand(cands[0], TopError.TOKEN)
    s.cand(cands[1])
    for f in xs:
        s.x(f)
    cands, xs = s.group(2, [1, 0], [65537, 12345])
    s.cand(cands[0], TopError.WEIGHT)
    s.cand(cands[1])
    for f in xs:
        s.x(f)
    # X beats of a bad beat number and of a candidate past the group's, dropped: exact
    cands, xs = s.group(0, [1], [50000])
    s.cand(cands[0])
    s.x({**xs[0], "beat": 1, "last": 0}, TopError.BEAT)
    s.x({**xs[0], "candidate": 1, "last": 0}, TopError.CANDIDATE)
    s.x(xs[0])
    s.flush(0)
    s.flush(1)
    # `last` on the first of two X beats: the group closes there (slot 2, not meaningful),
    # the second finds no group
    cands, xs = s.group(1, [2, 2], [1000, 2000], exact=False)
    for f in cands:
        s.cand(f)
    s.x({**xs[0], "last": 1}, TopError.LAST)
    s.x(xs[1], TopError.CANDIDATE)
    s.send_good(*s.group(2, [0, 1], [65536, 7]))
    # X beats cut short by the next CAND: the path closes the group itself
    cands, xs = s.group(0, [2, 2], [1000, 2000], exact=False)
    for f in cands:
        s.cand(f)
    s.x(xs[0])
    # three CANDs, `last` on the third only: the second closes a group of two (COUNT), the
    # third waits for that group's X beats to be closed, then makes a group of one whose first
    # X beat is its last; the host's second X beat finds no group
    a, _ = s.group(1, [2, 2], [1, 2], exact=False)
    b, bx = s.group(2, [2], [3], exact=False)
    s.cand(a[0], None)
    s.rejects.append((TopError.LAST, int(TopOp.X)))        # the group before, closed
    s.cand({**a[1], "last": 0}, TopError.COUNT)
    s.rejects.append((TopError.LAST, int(TopOp.X)))        # the group of two, closed
    s.cand(b[0])
    s.x({**bx[0], "last": 0}, TopError.LAST)
    s.x({**bx[0], "candidate": 1, "last": 1}, TopError.CANDIDATE)
    s.send_good(*s.group(0, [1, 0], [30000, 40000]))
    s.flush(0)
    s.flush(1)
    s.flush(2, exact=False)
    return s


def run(script: Script, seed: int, pressure: float):
    m, disp, engine, regs = build()
    rng = random.Random(seed)
    cmds = deque(script.beats)
    weights = {name: deque(items) for name, items in script.weight_items.items()}
    got = {name: [] for name in OUTPUTS}
    rejects, registers = [], {}
    total = {name: len(items) for name, items in script.want.items()}

    async def tb(ctx):
        offered = False
        for cycle in range(100_000):
            offered = bool(cmds) and (offered or rng.random() >= pressure)
            ctx.set(disp.cmd.valid, offered)
            if cmds:
                ctx.set(disp.cmd.payload.as_value(), cmds[0])
            for name, q in weights.items():
                port = getattr(engine, name)
                ctx.set(port.valid, bool(q))
                if q:
                    ctx.set(port.payload.as_value(), q[0])
            for name in OUTPUTS:
                ctx.set(getattr(engine, name).ready, rng.random() >= pressure)
            if offered and ctx.get(disp.cmd.ready):
                cmds.popleft()
                offered = False
            for name, q in weights.items():
                if q and ctx.get(getattr(engine, name).ready):
                    q.popleft()
            for name in OUTPUTS:
                port = getattr(engine, name)
                if ctx.get(port.valid) and ctx.get(port.ready):
                    got[name].append(ctx.get(port.payload.as_value()))
            if ctx.get(disp.rejected.valid):
                rejects.append((TopError(ctx.get(disp.rejected.payload.code)),
                                ctx.get(disp.rejected.payload.tag)))
            await ctx.tick()
            if not cmds and all(len(got[n]) == total[n] for n in OUTPUTS):
                break
        for reg in (TopCsr.COMMAND_STATUS, TopCsr.COMMAND_REJECTED):
            ctx.set(regs.csr.addr, reg)
            await ctx.tick()
            registers[reg.name] = ctx.get(regs.csr.data)

    sim = Simulator(m)
    sim.add_clock(1e-8)
    sim.add_testbench(tb)
    sim.run()
    assert not cmds and all(len(got[n]) == total[n] for n in OUTPUTS), \
        f"hang: {len(cmds)} beats left, outputs {[(n, len(v), total[n]) for n, v in got.items()]}"
    return got, rejects, registers


@pytest.mark.parametrize("pressure", [0.0, 0.3])
def test_bad_command_beats_are_rejected_and_the_good_groups_are_exact(pressure):
    script = bad_script(seed=28)
    got, rejects, registers = run(script, seed=5, pressure=pressure)
    assert rejects == script.rejects
    lay = layouts(D, F, CANDS, WORD, TOKENS)
    for name in OUTPUTS:
        for i, (g, w) in enumerate(zip(got[name], script.want[name])):
            if w is not None:
                assert unpack(lay[name], g) == w, f"{name} item {i}"
    status = top_status_layout.from_bits(registers["COMMAND_STATUS"])
    assert (status.error, TopError(status.code), status.tag) == (1, TopError.OP, 7)
    assert registers["COMMAND_REJECTED"] == len(script.rejects) == 16


def test_command_encoders_refuse_out_of_range_fields():
    with pytest.raises(ValueError, match=r"^token slot = 3 is out of range: accepted 0\.\.2$"):
        cand_item(1, 2, 3, 0, True, tokens=3, ffn=8)
    with pytest.raises(ValueError, match=r"^routing weight = 65537 is out of range: "
                                         r"accepted 0\.\.65536$"):
        cand_item(1, 2, 0, 65537, True, tokens=3, ffn=8)
    with pytest.raises(ValueError, match=r"^DOWN mask channel = 8 is out of range: "
                                         r"accepted 0\.\.7$"):
        cand_item(1, 2, 0, 0, True, tokens=3, ffn=8, down_channels=[0, 8])
    with pytest.raises(ValueError, match=r"^X candidate = 2 is out of range: accepted 0\.\.1$"):
        x_item(2, 0, [0] * 8, True, 2, 8, 64)
    with pytest.raises(ValueError, match=r"^X beat = 1 is out of range: accepted 0\.\.0$"):
        x_item(0, 1, [0] * 8, True, 2, 8, 64)
    with pytest.raises(ValueError, match=r"^token slot = 3 is out of range: accepted 0\.\.2$"):
        flush_item(3, 3)


def test_two_checkers_share_the_registers():
    """The command path and the feeder report into one RejectRegisters: two rejections in one
    cycle count two, STATUS keeps the lower port's, later ones leave it."""
    from edgexpert.contracts.rejects import RejectCsr
    dut = RejectRegisters(TopError, OP_BITS, sources=2)
    regs = {}

    async def tb(ctx):
        for port, code, tag in ((0, TopError.BEAT, TopOp.X), (1, TopError.MASK_TAIL, TopOp.EMA)):
            ctx.set(dut.rejected[port].valid, 1)
            ctx.set(dut.rejected[port].payload.code, code)
            ctx.set(dut.rejected[port].payload.tag, tag)
        await ctx.tick()
        ctx.set(dut.rejected[0].valid, 0)
        await ctx.tick()
        ctx.set(dut.rejected[1].valid, 0)
        for reg in RejectCsr:
            ctx.set(dut.csr.addr, reg)
            await ctx.tick()
            regs[reg] = ctx.get(dut.csr.data)

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(tb)
    sim.run()
    status = top_status_layout.from_bits(regs[RejectCsr.STATUS])
    assert (status.error, TopError(status.code), status.tag) == (1, TopError.BEAT, TopOp.X)
    assert regs[RejectCsr.REJECTED] == 3 and regs[RejectCsr.COMPLETED] == 0
