"""The trace's name of each netlist name, and the VCD's text-valued signals, from the design
(synth/signal_names.py): the top's failure in small. Its AXI read response is an enum, which
Amaranth writes into the VCD as text only, and it feeds a memory's write enable; its ports clash
with the names of the submodule they feed, so the netlist's plain `valid` is another signal in the
VCD. A hand-made gate netlist of the design (what Yosys makes of it, osu018 cells) is evaluated
on the simulation's trace; no synthesis tool runs."""

import re

from amaranth.back import rtlil
from amaranth.hdl import Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from edgexpert.sim.stimuli.common import Stimulus, simulate
from edgexpert.support.tools import liberty_path
from edgexpert.synth.activity import evaluate, read_vcd
from edgexpert.synth.flow import _memory_accesses
from edgexpert.synth.liberty import read_liberty
from edgexpert.hw.axi import AxiResp
from edgexpert.synth.memories import Memory
from edgexpert.synth.netlist import Netlist, NetlistCell
from edgexpert.synth.signal_names import trace_names, vcd_text

CYCLES = 200
SEED = 3


class Beat(wiring.Component):
    """Writes on a valid OKAY beat; an FSM (its state is text in the VCD) and two registers
    named `seen` (the second becomes `seen$N`)."""
    resp: In(AxiResp)
    valid: In(1)
    wr_en: Out(1)

    def elaborate(self, platform):
        m = Module()
        seen, toggled = Signal(name="seen"), Signal(name="seen")
        m.d.comb += self.wr_en.eq(self.valid & (self.resp == AxiResp.OKAY))
        m.d.sync += [seen.eq(self.wr_en), toggled.eq(toggled ^ seen)]
        with m.FSM():
            with m.State("Idle"):
                with m.If(self.valid):
                    m.next = "Busy"
            with m.State("Busy"):
                m.next = "Idle"
        return m


class Receiver(wiring.Component):
    resp: In(AxiResp)
    valid: In(1)
    enable: In(1)
    wr_en: Out(1)

    def elaborate(self, platform):
        m = Module()
        m.submodules.beat = beat = Beat()
        m.d.comb += [beat.resp.eq(self.resp), beat.valid.eq(self.valid & self.enable),
                     self.wr_en.eq(beat.wr_en)]
        return m


def beats(driven: list[tuple[AxiResp, int, int]]):
    """A stimulus of random responses, valid and enable, each cycle's kept in `driven`; it
    returns the writes (valid, enabled, OKAY beats)."""
    async def drive_beats(ctx, dut, rng, cycles):
        for _ in range(cycles):
            beat = (rng.choice(list(AxiResp)), int(rng.random() < 0.5), int(rng.random() < 0.7))
            ctx.set(dut.resp, beat[0])
            ctx.set(dut.valid, beat[1])
            ctx.set(dut.enable, beat[2])
            driven.append(beat)
            await ctx.tick()
        return sum(v & e & (r == AxiResp.OKAY) for r, v, e in driven)
    return Stimulus("write", drive_beats)


def _netlist(toggled: str) -> Netlist:
    """Receiver's gates: the write enable from the response, valid and enable, the FSM's state
    and the two `seen` registers (`toggled`: the second's RTLIL name)."""
    clk, resp0, resp1, valid, enable = 1, 2, 3, 4, 5
    ok, beat_valid, wr_en, state, idle, busy_next, seen, toggled_q, toggle = range(6, 15)
    cells = [NetlistCell("ok", "NOR2X1", {"A": resp0, "B": resp1, "Y": ok}),
             NetlistCell("v", "AND2X2", {"A": valid, "B": enable, "Y": beat_valid}),
             NetlistCell("we", "AND2X2", {"A": beat_valid, "B": ok, "Y": wr_en}),
             NetlistCell("idle", "INVX1", {"A": state, "Y": idle}),
             NetlistCell("next", "AND2X2", {"A": idle, "B": beat_valid, "Y": busy_next}),
             NetlistCell("state", "DFFPOSX1", {"CLK": clk, "D": busy_next, "Q": state}),
             NetlistCell("seen", "DFFPOSX1", {"CLK": clk, "D": wr_en, "Q": seen}),
             NetlistCell("toggle", "XOR2X1", {"A": seen, "B": toggled_q, "Y": toggle}),
             NetlistCell("toggled", "DFFPOSX1", {"CLK": clk, "D": toggle, "Q": toggled_q})]
    names = {resp0: [("resp", 0)], resp1: [("resp", 1)], valid: [("valid", 0)],
             enable: [("enable", 0)], beat_valid: [("beat.valid", 0)],
             wr_en: [("beat.wr_en", 0), ("wr_en", 0)], state: [("beat.fsm_state", 0)],
             seen: [("beat.seen", 0)], toggled_q: [(toggled, 0)]}
    return Netlist("rx", {"clk": [clk], "resp": [resp0, resp1], "valid": [valid],
                          "enable": [enable]},
                   {"edgexpert_mem0__WR_EN": [wr_en]}, cells, names)


#: a 4 x 1 memory written by the enable (the EMA buffer banks' case), cut out of the netlist
MEMORY = Memory("buf", "$mem", "edgexpert_mem0", 1, 4, 0, 1, 0, {"WR_EN": 1}, [],
                [[[("wr_en", 0)]]], [])


def _rtlil_names(text: str) -> set[str]:
    """Every wire of the RTLIL, named as Yosys's `flatten` names it."""
    names, module = set(), None
    for line in text.splitlines():
        if line.startswith("module "):
            module = line.split("\\", 1)[1].split(".")[1:]
        elif line.strip().startswith("wire ") and "\\" in line:
            names.add(".".join([*module, line.split("\\", 1)[1].strip()]))
    return names


def test_an_enum_input_and_clashing_names_are_read_from_the_trace(tmp_path):
    vcd = tmp_path / "rx.vcd"
    driven = []
    writes = simulate(Receiver(), beats(driven), CYCLES, SEED, 1e-8, vcd)
    names = trace_names(Receiver(), "rx")
    # every name pairs a netlist (RTLIL) name with a VCD one
    rtlil_names = _rtlil_names(rtlil.convert(Receiver(), name="rx", emit_src=False))
    vcd_names = set(re.findall(r"^\$var \w+ \d+ \S+ (\S+) \$end$", vcd.read_text(), re.M))
    assert set(names.of_net) <= rtlil_names
    assert {n.rsplit(".", 1)[-1] for n in names.of_net.values()} <= vcd_names
    # the netlist's ports were named first; in the VCD the submodule's ports took the plain names
    assert names.of_net["valid"] != "valid" and names.of_net["resp"] != "resp"
    (toggled,) = [n for n in rtlil_names if n.startswith("beat.seen$")]
    assert names.of_net[toggled] == toggled  # a submodule's names agree
    assert names.texts[names.of_net["resp"]] == (2, {r.name: r.value for r in AxiResp})
    assert names.texts["beat.fsm_state"] == (1, {"Idle/0": 0, "Busy/1": 1})

    trace = read_vcd(vcd, texts=names.texts)
    valid_cycles = sum(v for _, v, _ in driven)
    beat_valid_cycles = sum(v & e for _, v, e in driven)
    assert trace.bits[(names.of_net["valid"], 0)].bit_count() == valid_cycles
    assert trace.bits[("valid", 0)].bit_count() == beat_valid_cycles  # another signal
    errors = sum(r != AxiResp.OKAY for r, _, _ in driven)
    assert (trace.bits[(names.of_net["resp"], 0)] | trace.bits[(names.of_net["resp"], 1)]) \
        .bit_count() == errors

    netlist, library = _netlist(toggled), read_liberty(liberty_path())
    evaluation = evaluate(netlist, library, trace, trace_names=names.of_net)
    stats = evaluation.stats
    assert stats["input_bits_from_trace"] == stats["input_bits"] == 4
    # the FSM's state (text) and the `$`-named register are traced, and follow their D inputs
    assert stats["state_from_trace"] == stats["state_elements"] == 3
    assert stats["state_names_disagreeing"] == 0 and stats["nets_default_activity"] == 0
    valid = netlist.inputs["valid"][0]
    assert evaluation.high_cycles[valid] == valid_cycles
    assert _memory_accesses([MEMORY], netlist, evaluation) == [
        {"name": "buf", "read_bits": 0, "write_bits": writes, "enables_evaluated": True}]

    # without the design's names: the response is not in the trace, so the write enable is
    # unknown and the memory charged as written every cycle, an upper bound; the port `valid`
    # silently takes the submodule's values
    blind = evaluate(netlist, library, read_vcd(vcd))
    assert blind.stats["input_bits_from_trace"] == 2
    assert blind.high_cycles[valid] == beat_valid_cycles != valid_cycles
    assert blind.stats["state_from_trace"] == 1  # only `seen`: no text, no `$`
    assert _memory_accesses([MEMORY], netlist, blind) == [
        {"name": "buf", "read_bits": 0, "write_bits": CYCLES, "enables_evaluated": False}]


def test_text_signals_need_every_text_in_their_table(tmp_path):
    vcd = tmp_path / "texts.vcd"
    vcd.write_text("\n".join([
        "$timescale 1 fs $end", "$scope module bench $end", "$scope module top $end",
        "$var wire 1 ! clk $end", "$var string 1 # state $end", "$var string 1 $ mode $end",
        "$upscope $end", "$upscope $end", "$enddefinitions $end",
        "#0", "$dumpvars", "0!", f"s{vcd_text('Wait here/0')} #", "sA $", "$end",
        "#5", "1!", "#10", "0!", f"s{vcd_text('Go/1')} #", "sB $", "#15", "1!", "#20", "0!",
        "#25", "1!", ""]))
    tables = {"state": (2, {vcd_text("Wait here/0"): 0, vcd_text("Go/1"): 1}),
              "mode": (1, {"A": 0})}
    trace = read_vcd(vcd, texts=tables)
    assert trace.cycles == 3
    assert (trace.bits[("state", 0)], trace.bits[("state", 1)]) == (0b110, 0)
    # `mode` took a text its table lacks: its bits are unknown, not guessed
    assert ("mode", 0) not in trace.bits
    assert not any(name == "state" for name, _ in read_vcd(vcd).bits)
