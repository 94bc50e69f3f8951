"""sim/perf/traffic.py: every byte a decoded token costs, on a measured run written by hand."""

from dataclasses import replace

import pytest

from edgexpert.contracts.config import load_config
from edgexpert.contracts.errors import InputError
from edgexpert.sim.perf.models import bundled_spec, model_spec
from edgexpert.sim.perf.traffic import (add_traffic, measured_plan, onchip_plan, resident_share,
                                   staging_bytes, traffic_columns)

# a speculative step as golden's summarize reports it: 6 draft passes of 8 tokens and one
# verification of 65, at 100 cached entries, 4 tokens per step
SD = {"tokens": 40, "steps": 10, "pass_kinds": {
    "draft": {"runs_per_step": 6.0, "tokens": 8.0, "context": 100.0, "expert_bytes": 50_000.0},
    "verify": {"runs_per_step": 1.0, "tokens": 65.0, "context": 100.0,
               "expert_bytes": 300_000.0}}}
AR = {"tokens": 10, "steps": 10, "pass_kinds": {
    "ar": {"runs_per_step": 1.0, "tokens": 1.0, "context": 100.0, "expert_bytes": 305_152.0}}}

# the bundled model's tensors (tests/test_estimate.py derives them): attention, routers, norms,
# head; an embedding row; per token, all layers, K and V as the integer path stores them
ATTENTION, ROUTERS, NORMS, HEAD = 301_056, 24_832, 3_456, 794_624
ROW = 194
KV = 4 * (192 + 6 * 4 + 192 * 4)


@pytest.fixture(scope="module")
def config():
    return load_config()


def test_a_speculative_step_by_hand(config):
    c = traffic_columns(measured_plan("naive_sd", SD, bundled_spec(), config))
    # the default 32 KiB share keeps the norms and routers: every pass reads attention and head
    weights = ATTENTION + HEAD
    assert c["expert_bytes_per_token"] == round((6 * 50_000 + 300_000) / 4)
    assert c["nonexpert_bytes_per_token"] == round((7 * weights + (6 * 8 + 65) * ROW) / 4)
    assert c["kv_bytes_per_token"] == round((7 * 100 * KV + (6 * 8 + 65) * KV) / 4)
    assert c["total_bytes_per_token"] == pytest.approx(
        c["expert_bytes_per_token"] + c["nonexpert_bytes_per_token"] + c["kv_bytes_per_token"],
        abs=2)
    assert c["passes_per_token"] == 7 / 4 and c["draft_head_bytes_per_token"] == 0


def test_an_eagle_draft_pass_reads_its_head_and_one_layer_of_kv_but_not_the_target(config):
    # the same step drafted by an EAGLE head of 500 kB per pass: no experts, no target weights
    eagle = {"tokens": 40, "steps": 10, "pass_kinds": {
        "draft": {"runs_per_step": 6.0, "tokens": 8.0, "context": 100.0, "expert_bytes": 0.0,
                  "draft_head_bytes": 500_000.0, "reads_target": 0.0},
        "verify": {**SD["pass_kinds"]["verify"], "draft_head_bytes": 0.0, "reads_target": 1.0}}}
    c = traffic_columns(measured_plan("naive_sd", eagle, bundled_spec(), config))
    weights = ATTENTION + HEAD
    assert c["expert_bytes_per_token"] == round(300_000 / 4)
    assert c["draft_head_bytes_per_token"] == round(6 * 500_000 / 4)
    assert c["nonexpert_bytes_per_token"] == round((weights + (6 * 8 + 65) * ROW) / 4)
    # the head's one layer of KV entries: a quarter of the bundled model's four
    assert c["kv_bytes_per_token"] == round((6 * (100 + 8) * KV / 4 + (100 + 65) * KV) / 4)
    assert c["total_bytes_per_token"] == pytest.approx(
        c["expert_bytes_per_token"] + c["nonexpert_bytes_per_token"] + c["kv_bytes_per_token"]
        + c["draft_head_bytes_per_token"], abs=2)


def test_the_resident_share_comes_off_every_pass_and_shares_the_sram(config):
    none = replace(config, policies=replace(config.policies, resident_nonexpert_kib=0))
    plain = traffic_columns(measured_plan("ar", AR, bundled_spec(), none))
    kept = traffic_columns(measured_plan("ar", AR, bundled_spec(), config))
    assert plain["nonexpert_bytes_per_token"] - kept["nonexpert_bytes_per_token"] == NORMS + ROUTERS
    over = replace(config, policies=replace(config.policies, resident_nonexpert_kib=64))
    with pytest.raises(ValueError, match="accepted a sum of at most 512 KiB"):
        measured_plan("ar", AR, bundled_spec(), over)


def test_results_come_ordered_by_total_bytes_with_the_change_against_naive(config):
    out = add_traffic({"naive_sd": dict(SD), "ar": dict(AR)}, bundled_spec(), config)
    assert list(out) == ["ar", "naive_sd"]
    assert out["naive_sd"]["total_change_vs_naive_sd"] == 0
    assert out["ar"]["total_change_vs_naive_sd"] == round(
        out["ar"]["total_bytes_per_token"] / out["naive_sd"]["total_bytes_per_token"] - 1, 4)


def test_the_estimate_prices_measured_passes_of_the_bundled_model_only(config):
    from edgexpert.sim.perf.estimate import estimate
    measured = {"bundled": {"ar": AR}}
    bundled, olmoe = estimate(config, ["bundled", "olmoe-1b-7b"], ["ar"], measured=measured)
    assert bundled["routing"] == "trace" and olmoe["routing"] == "synthetic"
    assert bundled["bytes_per_token"]["expert"] == 305_152
    assert bundled["bytes_per_token"]["kv"] == (100 + 1) * KV
    assert bundled["context_tokens"] == 100
    # policies without a measurement keep the synthetic plan
    assert estimate(config, ["bundled"], ["naive_sd"], measured=measured)[0]["routing"] == \
        "synthetic"


# the eagle step of the test above, 480,000 B of head per draft pass
EAGLE = {"tokens": 40, "steps": 10, "onchip": "reuse", "pass_kinds": {
    "draft": {"runs_per_step": 6.0, "tokens": 8.0, "context": 100.0, "expert_bytes": 0.0,
              "draft_head_bytes": 480_000.0, "reads_target": 0.0},
    "verify": {**SD["pass_kinds"]["verify"], "draft_head_bytes": 0.0, "reads_target": 1.0}}}


def test_the_sram_by_reuse_keeps_the_head_first_then_non_expert_weights(config):
    spec = bundled_spec()
    # a landing buffer of two GATE_UP blocks (192 columns of 64 B and 128 x 2 B of scales,
    # aligned), then the head, then in what is left whole tensors: the norms (3,456 B) and two
    # of the four routers (6,208 B each)
    staging = 2 * (192 * 64 + 256)
    assert staging_bytes(spec, config) == staging
    kept = onchip_plan(spec, config, "reuse", 480_000)
    assert kept["draft_head"] == 480_000
    assert kept["nonexpert"] == spec.resident(524_288 - staging - 480_000)
    assert kept["nonexpert"] == {"norms": NORMS, "routers": ROUTERS // 2}
    # a head larger than what the buffer leaves is streamed, and the SRAM goes to non-expert weights
    big = onchip_plan(spec, config, "reuse", 524_288 - staging + 1)
    assert big["draft_head"] == 0 and big["nonexpert"] == spec.resident(524_288 - staging)
    assert onchip_plan(spec, config)["nonexpert"] == resident_share(spec, config)
    with pytest.raises(InputError, match="on-chip rule 'x' is not known: accepted configured, reuse"):
        onchip_plan(spec, config, "x")
    # a full-size model's matrix is streamed in parts: the landing buffer is half the SRAM
    assert staging_bytes(model_spec("qwen3-30b-a3b"), config) == 524_288 // 2


def test_a_head_on_chip_is_read_from_sram_by_the_draft_passes_only(config):
    spec = bundled_spec()
    plan = measured_plan("combined", EAGLE, spec, config)
    c = traffic_columns(plan)
    assert c["draft_head_bytes_per_token"] == 0
    # the one verification pass of a step reads two of the routers from DRAM too
    kept = NORMS + ROUTERS // 2
    assert c["nonexpert_bytes_per_token"] == round(
        (ATTENTION + HEAD + ROUTERS // 2 + (6 * 8 + 65) * ROW) / 4)
    draft, verify = (p for p, _ in plan.passes)
    assert draft.resident_bytes == 480_000 and draft.held_bytes == kept
    assert verify.resident_bytes == kept and verify.held_bytes == 480_000
    assert "the draft head's 480000 B on chip" in plan.notes[0]
    # the same run with the configured split streams its head
    configured = traffic_columns(measured_plan("combined", {**EAGLE, "onchip": "configured"},
                                               spec, config))
    assert configured["draft_head_bytes_per_token"] == 6 * 480_000 / 4
