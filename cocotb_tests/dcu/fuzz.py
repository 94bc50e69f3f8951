"""The DCU's fuzz bench in Amaranth's simulator (docs/blocks/dcu.md, "Fuzz bench"; issue 28):
random sequences of good jobs (jobs.py's kinds, golden's commands) and bad ones (bad_jobs.py,
every `DcuError`) played by block_fuzz.py under random pauses on `route`, `data` and `cmd` and
random resets. `edgexpert bench fuzz --block dcu` runs it long; tests/test_block_fuzz.py short."""

from __future__ import annotations

import random

from edgexpert.cocotb_tests.block_fuzz import Sequence, run_block_fuzz
from edgexpert.cocotb_tests.dcu.bad_jobs import bad_jobs
from edgexpert.cocotb_tests.dcu.jobs import JOB_KINDS, random_job
from edgexpert.golden.blocks.dcu import job_commands
from edgexpert.contracts.dcu import LANES, TAG_BITS, DcuCsr, DcuError, encode_job
from edgexpert.contracts.weight_layout import Matrix, WeightLayout
from edgexpert.hw.dcu import Dcu
from edgexpert.hw.dcu.selector import DIGIT_BITS

__all__ = ["FUZZ_SHAPE", "MAX_JOBS", "BAD_SHARE", "dcu_sequence", "run_dcu_fuzz"]

#: the fuzzed instance, small (tests/test_dcu_sim.py's partial-words shape): GATE_UP 48 and DOWN
#: 40 channels (two words each, the last one partial: the PRUNE case exists), groups of up to 4,
#: 2 layers of 5 experts
FUZZ_SHAPE = {"gate_up": 48, "down": 40, "max_group": 4, "layers": 2, "experts": 5}
#: jobs per sequence: 1..MAX_JOBS, each bad with probability BAD_SHARE
MAX_JOBS = 6
BAD_SHARE = 0.35
#: the key bits the threshold search walks at most: the 29-bit importance (docs/contracts.md)
KEY_BITS = 29


def _layout() -> WeightLayout:
    s = FUZZ_SHAPE
    return WeightLayout(n_layers=s["layers"], n_experts=s["experts"], d_model=s["gate_up"],
                        expert_ffn=s["down"])


def job_cycles(route: list[int], data: list[int], words: int) -> int:
    """A job's cycles at full speed, at most (docs/blocks/dcu.md, "Inside": the collector's 1 +
    words + n, the weigher's n + 2, the accumulator's n x words + 3, four hand-overs, the
    selector's ceil(B/4) x words + 1 and 2 + words, and a NEW_STEP), with n <= the route beats
    and n x words the data beats."""
    return 2 * len(route) + 2 + len(data) + 3 + 4 + (-(-KEY_BITS // DIGIT_BITS) + 1) * words + 4


def dcu_sequence(rng: random.Random) -> Sequence:
    """1..MAX_JOBS jobs, each bad (any kind of bad_jobs.py) with probability BAD_SHARE, else good
    (any of JOB_KINDS); tags run on from a random one."""
    s, layout = FUZZ_SHAPE, _layout()
    words = max(-(-layout.in_channels(mx) // LANES) for mx in Matrix)
    route, data, cmd, rejections, counts = [], [], [], [], {"valid_jobs": 0, "invalid_jobs": 0}
    bound, tag = 0, rng.randrange(256)
    for _ in range(rng.randint(1, MAX_JOBS)):
        if rng.random() < BAD_SHARE:
            bad = rng.choice(bad_jobs(layout, s["max_group"], rng, first_tag=tag))
            r, d = bad.route, bad.data
            rejections.append((int(bad.code), bad.tag))
            counts["invalid_jobs"] += 1
            counts[f"invalid_{bad.code.name.lower()}"] = \
                counts.get(f"invalid_{bad.code.name.lower()}", 0) + 1
        else:
            job = random_job(rng, layout, s["max_group"], tag, rng.choice(JOB_KINDS))
            r, d = encode_job(layout, job, s["max_group"])
            cmd += job_commands(layout, job)
            counts["valid_jobs"] += 1
        route += r
        data += d
        bound += job_cycles(r, d, words)
        tag = (tag + 1) % 256
    return Sequence({"route": route, "data": data}, {"cmd": cmd}, rejections,
                    counts["valid_jobs"], bound, counts)


def run_dcu_fuzz(sequences: int, seed: int, progress: bool = False,
                 sequence=dcu_sequence) -> dict:
    """`sequences` sequences drawn by `sequence` (a test may spoil dcu_sequence's) on the
    FUZZ_SHAPE instance: block_fuzz.run_block_fuzz's report and the hardware."""
    s = FUZZ_SHAPE
    dut = Dcu(s["gate_up"], s["down"], s["max_group"], layers=s["layers"], experts=s["experts"])
    report = run_block_fuzz("dcu", dut, lambda d: {"route": d.route, "data": d.data},
                            lambda d: {"cmd": d.cmd}, DcuCsr, sequence, DcuError, TAG_BITS,
                            sequences, seed, progress=progress)
    return {**report, "hardware": dict(FUZZ_SHAPE)}
