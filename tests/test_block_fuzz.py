"""The fuzz benches of the DCU and the PRU alone (cocotb_tests/block_fuzz.py; docs/blocks/dcu.md
and pru.md, "Fuzz bench"), short runs in Amaranth's simulator: random good and bad jobs or
prompts under random pauses and resets, every output against golden, every bad one reported,
no hang. `edgexpert bench fuzz --block dcu|pru` runs them long. The last test shows the bench
fails on a hang and a mismatch, naming the seed and the sequence."""

import dataclasses

import pytest

from edgexpert.cocotb_tests.block_fuzz import BlockFuzzError
from edgexpert.cocotb_tests.dcu.fuzz import dcu_sequence, run_dcu_fuzz
from edgexpert.cocotb_tests.pru.fuzz import run_pru_fuzz
from edgexpert.cocotb_tests.pru.prompts import BAD_KINDS
from edgexpert.contracts.dcu import DcuError

SEED = 20261203


def test_dcu_fuzz_short():
    """60 sequences (37 s on the loaded 2-core machine): every kind of bad job, resets
    mid-sequence."""
    counts = run_dcu_fuzz(60, SEED)["counts"]
    print(counts)
    assert {f"invalid_{c.name.lower()}" for c in DcuError if c} <= set(counts), counts
    assert counts["sequences"] == 60 and counts["cut_by_reset"] >= 1
    assert counts["valid_jobs"] and counts["checked_words"] and counts["checked_rejections"]


def test_pru_fuzz_short():
    """100 sequences (23 s there): every kind of bad prompt, resets mid-sequence."""
    counts = run_pru_fuzz(100, SEED)["counts"]
    print(counts)
    assert {f"invalid_{kind}" for kind in BAD_KINDS} <= set(counts), counts
    assert counts["sequences"] == 100 and counts["cut_by_reset"] >= 1
    assert counts["valid_prompts"] and counts["checked_words"] and counts["checked_rejections"]


@pytest.mark.parametrize("spoil,message", [("extra", "hang"), ("flip", "mismatch")])
def test_the_fuzz_fails_on_a_hang_and_a_mismatch(spoil, message):
    """A word the DCU never sends is a hang; a wrong one a mismatch; both name seed and
    sequence."""
    def spoiled(rng):
        seq = dcu_sequence(rng)
        words = seq.outputs["cmd"]
        if spoil == "extra":
            words = words + [0]
        elif words:
            words = [words[0] ^ 1] + words[1:]
        return dataclasses.replace(seq, outputs={"cmd": words})

    with pytest.raises(BlockFuzzError, match=rf"^dcu fuzz, seed 5, sequence \d+: .*{message}"):
        run_dcu_fuzz(4, 5, sequence=spoiled)
