"""CACTI runs made on this machine: parsed figures, the cache, the rule for small memories."""

import pytest

from edgexpert.contracts.config import load_config
from edgexpert.support.tools import ToolError, cacti_path, check_tools
from edgexpert.synth.cacti import (MIN_BYTES_PER_BANK, MIN_ROWS_PER_BANK, SramSpec, describe,
                                   sram_cost)

_BUILT = any(t.name == "cacti" and t.found for t in check_tools())
#: the default target node (synth.target_node_nm, 28 nm)
NODE = load_config().synth.target_node_nm


@pytest.fixture
def build_dir(tmp_path, monkeypatch):
    if not _BUILT:
        # scripts/setup.sh builds CACTI, so this only happens on a machine not set up with it
        pytest.skip(f"!!! CACTI IS NOT BUILT ({cacti_path()} is missing): THE SRAM COSTS WERE NOT "
                    "TESTED. Run bash scripts/setup.sh !!!")
    monkeypatch.setenv("EDGEXPERT_BUILD_DIR", str(tmp_path))
    return tmp_path


def test_a_small_memory_is_run_parsed_and_cached(build_dir):
    spec = SramSpec(32, 256, read_ports=1, write_ports=1)  # 1 KiB, one read and one write port
    cost = sram_cost(spec, NODE)
    assert not cost.cached and cost.rule == "as declared"
    assert cost.cacti_inputs == {"size_bytes": 1024, "block_bytes": 4, "width_bits": 32,
                                 "rows_per_bank": 256, "banks": 1, "read_ports": 1,
                                 "write_ports": 1, "rw_ports": 0, "technology_um": 0.028}
    # plausible for 8 Kbit at 28 nm: a few thousand um2, well under a ns, under a pJ per bit
    assert 1e-9 < cost.area_m2 < 1e-7
    # (CACTI's random cycle time can be shorter than its access time: the array is pipelined)
    assert 0.1e-9 < cost.access_time_s < 5e-9 and 0.1e-9 < cost.cycle_time_s < 5e-9
    assert 1e-15 < cost.read_energy_per_bit_j < 1e-12
    assert 1e-15 < cost.write_energy_per_bit_j < 1e-12
    assert cost.read_energy_per_bit_j == pytest.approx(cost.read_energy_j / 32)
    assert 0 < cost.leakage_w < 1e-5
    run = build_dir / "cacti" / cost.key
    config = (run / "cacti.cfg").read_text()
    for line in ("-size (bytes) 1024", "-output/input bus width 32", "-exclusive read port 1",
                 "-technology (u) 0.028", '-Data array cell type - "itrs-lstp"',
                 "-operating temperature (K) 300"):
        assert f"\n{line}\n" in config
    assert "CACTI (version 7.0.3DD" in (run / "cacti.log").read_text()
    # a repeat reads the stored result: the same figures, no run
    (run / "cacti.log").unlink()
    again = sram_cost(spec, NODE)
    assert again.cached and again == cost and not (run / "cacti.log").exists()
    assert cost.key in describe(cost.to_json())
    # another target node is another run, at that node's technology: larger at 45 nm
    at45 = sram_cost(spec, 45)
    assert at45.key != cost.key and at45.cacti_inputs["technology_um"] == 0.045
    assert at45.area_m2 > cost.area_m2
    assert "-technology (u) 0.045" in (build_dir / "cacti" / at45.key / "cacti.cfg").read_text()


def test_the_512kib_reference_point(build_dir):
    """EdgeXpert's shared SRAM size with a 512-bit read-write port: CACTI's figures, and how they
    grow from 64 KiB (docs/synthesis.md quotes them)."""
    big = sram_cost(SramSpec(512, 8192, rw_ports=1), NODE)
    assert big.read_energy_j == pytest.approx(0.120745e-9, rel=1e-5)
    assert big.write_energy_j == pytest.approx(0.12921e-9, rel=1e-5)
    assert big.area_m2 == pytest.approx(0.869316e-6, rel=1e-5)
    assert big.access_time_s == pytest.approx(2.28542e-9, rel=1e-5)
    small = sram_cost(SramSpec(512, 1024, rw_ports=1), NODE)
    assert small.area_m2 < big.area_m2 / 4 and small.read_energy_j < big.read_energy_j
    # four banks: the routing to them costs energy per access, and leakage counts every bank
    banked = sram_cost(SramSpec(512, 8192, rw_ports=1, banks=4), NODE)
    assert banked.cacti_inputs["rows_per_bank"] == 2048
    assert banked.read_energy_j > big.read_energy_j and banked.leakage_w > big.leakage_w


def test_memories_below_cactis_minimum_are_costed_as_its_smallest_bank(build_dir):
    assert (MIN_ROWS_PER_BANK, MIN_BYTES_PER_BANK) == (32, 64)
    cost = sram_cost(SramSpec(37, 4, read_ports=1, write_ports=1), NODE)  # the EMA's location queue
    assert cost.cacti_inputs["rows_per_bank"] == 32 and cost.cacti_inputs["size_bytes"] == 160
    assert cost.rule == ("4 rows per bank is below CACTI's minimum bank (32 rows, 64 bytes): "
                         "costed as 32 rows, an overestimate; 37-bit words stored as 5 bytes")
    # energy per bit is per declared bit
    assert cost.read_energy_per_bit_j == pytest.approx(cost.read_energy_j / 37)
    assert cost.spec["bits"] == 148
    # a 1-byte word needs 64 rows to reach 64 bytes; a deeper memory of the same width shares
    # the run, but keeps its own shape and rule
    forty = sram_cost(SramSpec(8, 40, rw_ports=1), NODE)
    sixty_four = sram_cost(SramSpec(8, 64, rw_ports=1), NODE)
    assert forty.cacti_inputs["rows_per_bank"] == 64 and sixty_four.key == forty.key
    assert sixty_four.cached and sixty_four.spec["depth"] == 64 and sixty_four.rule == "as declared"
    assert forty.spec["depth"] == 40 and forty.rule.startswith("40 rows per bank is below")
    # a 1-bit queue (the top's): CACTI has no organisation for a 1-bit port, so 8 bits are asked
    bit = sram_cost(SramSpec(1, 16, read_ports=1, write_ports=1), NODE)
    assert bit.cacti_inputs["width_bits"] == 8 and bit.cacti_inputs["rows_per_bank"] == 64
    assert bit.rule.endswith("its 1-bit port costed as 8 bits") and bit.area_m2 > 0
    assert bit.read_energy_per_bit_j == pytest.approx(bit.read_energy_j)
    # ... the run an 8-bit queue of 64 rows makes: the same array, energy per its own bit
    byte = sram_cost(SramSpec(8, 64, read_ports=1, write_ports=1), NODE)
    assert byte.key == bit.key and byte.rule == "as declared"
    assert byte.read_energy_per_bit_j == pytest.approx(bit.read_energy_per_bit_j / 8)


@pytest.mark.parametrize("kwargs, message", [
    ({"width_bits": 0, "depth": 8, "rw_ports": 1}, "needs width_bits >= 1 and depth >= 1"),
    ({"width_bits": 8, "depth": 8}, "needs at least one port"),
    ({"width_bits": 8, "depth": 96, "rw_ports": 1, "banks": 3},
     "banks = 3 is out of range: accepted powers of two 1..64"),
    ({"width_bits": 8, "depth": 100, "rw_ports": 1, "banks": 8},
     "depth 100 does not split over 8 banks"),
    ({"width_bits": 8.5, "depth": 8, "rw_ports": 1}, "width_bits = 8.5 is out of range"),
])
def test_bad_specs_are_one_clear_line(kwargs, message):
    with pytest.raises(ValueError) as info:
        SramSpec(**kwargs)
    assert message in str(info.value) and "\n" not in str(info.value)


def test_a_failed_run_names_the_memory(build_dir, monkeypatch, tmp_path):
    """A binary that finds no organisation (CACTI prints an error and exits 1) is a ToolError."""
    fake = tmp_path / "fake" / "cacti"
    (fake.parent / "tech_params").mkdir(parents=True)
    fake.write_text("#!/bin/sh\necho 'ERROR: no valid data array organizations found'\nexit 1\n")
    fake.chmod(0o755)
    monkeypatch.setenv("EDGEXPERT_CACTI", str(fake))
    check_tools.cache_clear()
    try:
        with pytest.raises(ToolError, match=r"CACTI found no organisation for .*'size_bytes': "
                                            r"1024.*no valid data array organizations found"):
            sram_cost(SramSpec(32, 256, rw_ports=1), NODE)
    finally:
        check_tools.cache_clear()
