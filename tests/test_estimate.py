"""sim/perf/estimate.py and sim/perf/passes.py: bounds every estimate must obey, and plain decoding of the
bundled model by hand."""

from dataclasses import replace

import pytest

from edgexpert.contracts.config import load_config
from edgexpert.sim.perf.estimate import POLICIES, estimate
from edgexpert.sim.perf.models import model_names

MODELS = ["bundled", "olmoe-1b-7b", "qwen3-30b-a3b", "deepseek-v2-lite", "granite-1b-a400m",
          "mixtral-8x7b"]


@pytest.fixture(scope="module")
def config():
    return load_config()


@pytest.fixture(scope="module")
def results(config):
    return estimate(config, MODELS, list(POLICIES))


def test_every_model_and_policy_is_estimated(results):
    assert {(r["model"], r["policy"]) for r in results} == {(m, p) for m in MODELS
                                                            for p in POLICIES}
    assert all(r["routing"] == "synthetic" for r in results)


def test_roofline_bound(results, config):
    peak = config.platform.dram.peak_bytes_per_s
    for r in results:
        nbytes = sum(r["bytes_per_token"].values())
        assert r["latency_s_per_token"] >= nbytes / peak
        assert 0 < r["dram_utilization"] <= 1 and 0 < r["roofline_ratio"] <= 1
        assert r["tokens_per_s"] == pytest.approx(1 / r["latency_s_per_token"])
        assert r["prefill"]["latency_s_per_prompt_token"] > 0


def test_energies_add_up(results):
    for r in results:
        split = r["energy_j_per_token_split"]
        assert set(split) == {"dram", "sram", "mac", "control"}
        assert all(v > 0 for v in split.values())
        assert r["energy_j_per_token"] == pytest.approx(sum(split.values()), rel=1e-12)


def test_doubling_dram_bandwidth_cannot_slow_a_token(config, results):
    platform = replace(config.platform, dram=replace(config.platform.dram, channels=4))
    faster = estimate(replace(config, platform=platform), MODELS, list(POLICIES))
    for slow, fast in zip(results, faster):
        assert fast["latency_s_per_token"] <= slow["latency_s_per_token"]
        assert (fast["prefill"]["latency_s_per_prompt_token"]
                <= slow["prefill"]["latency_s_per_prompt_token"])
    # plain decoding is bandwidth-bound at EdgeXpert's point: twice the bandwidth, much faster
    plain = {r["model"]: r for r in results if r["policy"] == "ar"}
    for r in faster:
        if r["policy"] == "ar":
            assert r["latency_s_per_token"] < 0.6 * plain[r["model"]]["latency_s_per_token"]


def test_plain_decoding_of_the_bundled_model_by_hand(results):
    ar = next(r for r in results if r["model"] == "bundled" and r["policy"] == "ar")
    # 4 layers x top-4 experts x 19,072 B (docs/policies.md: 305,152 B per plain token)
    assert ar["bytes_per_token"]["expert"] == 4 * 4 * 19_072 == 305_152
    attention = 4 * 4 * (192 * 192 // 2 + 2 * 192)      # q, k, v, o: int4 + 16-bit scales
    router = 4 * (192 * 32 + 2 * 32)                     # int8 + scales
    norms = (2 * 4 + 1) * 192 * 2                        # 16-bit RMSNorm weights
    head = 4096 * 192 + 2 * 4096                         # int8 head + per-row scales
    embedding_row = 192 + 2
    # the default 32 KiB resident share keeps the norms and the routers
    assert ar["resident_nonexpert_bytes"] == {"norms": norms, "routers": router}
    assert ar["bytes_per_token"]["nonexpert"] == attention + head + embedding_row
    assert ar["bytes_per_token"]["draft"] == 0
    # one pass per token, the 512-token context's K and V read, one token's written: per layer
    # and token int8 keys (192 B) with a 32-bit scale per head (6 heads), 32-bit Q.12 values
    assert ar["bytes_per_token"]["kv"] == (512 + 1) * 4 * (192 + 6 * 4 + 192 * 4)


def test_unknown_names_are_one_line_with_the_accepted(config):
    with pytest.raises(ValueError) as err:
        estimate(config, ["olmoe"], ["ar"])
    assert "\n" not in str(err.value) and all(n in str(err.value) for n in model_names())
    with pytest.raises(ValueError) as err:
        estimate(config, ["bundled"], ["eagle"])
    assert "\n" not in str(err.value) and all(p in str(err.value) for p in POLICIES)


def test_cost_sources_say_which_table_was_used(config):
    table = {"costs": {"mac_lane.energy_per_mac": {"value": 1e-12, "unit": "J",
                                                   "source": "a test"}}}
    r = estimate(config, ["olmoe-1b-7b"], ["ar"], cost_table=table)[0]
    base = estimate(config, ["olmoe-1b-7b"], ["ar"], cost_table={})[0]
    assert "a test" in r["cost_sources"]["mac_lane.energy_per_mac"]
    assert base["cost_sources"]["mac_lane.energy_per_mac"].startswith("cited default")
    assert r["energy_j_per_token_split"]["mac"] > base["energy_j_per_token_split"]["mac"]


def test_a_resident_share_reads_fewer_bytes_and_is_checked(config):
    none = replace(config, policies=replace(
        config.policies, resident_nonexpert_kib=0))
    more = replace(config, policies=replace(
        config.policies, onchip_expert_kib=182, resident_nonexpert_kib=330))
    base = estimate(none, ["bundled", "olmoe-1b-7b"], ["ar"])
    kept = estimate(more, ["bundled", "olmoe-1b-7b"], ["ar"])
    # the bundled model's norms (3,456 B), routers (24,832 B) and attention (301,056 B) fit in
    # 330 KiB; of OLMoE's, the norms (33 x 4 KiB) and one layer's router (2048 x 64 + 128 B)
    assert kept[0]["resident_nonexpert_bytes"] == {"norms": 3456, "routers": 24832,
                                                   "attention": 301056}
    assert kept[1]["resident_nonexpert_bytes"] == {"norms": 33 * 4096, "routers": 131_200}
    for b, k in zip(base, kept):
        assert b["resident_nonexpert_bytes"] == {}
        assert k["bytes_per_token"]["nonexpert"] == (b["bytes_per_token"]["nonexpert"]
                                                     - sum(k["resident_nonexpert_bytes"].values()))
        assert k["latency_s_per_token"] < b["latency_s_per_token"]
        # kept weights still cost SRAM reads
        assert k["energy_j_per_token_split"]["sram"] > 0
    over = replace(config, policies=replace(
        config.policies, onchip_expert_kib=480, resident_nonexpert_kib=64))
    with pytest.raises(ValueError, match=r"accepted a sum of at most 512 KiB"):
        estimate(over, ["bundled"], ["ar"])


def test_double_buffering_by_hand(config):
    from edgexpert.sim.perf.models import bundled_spec
    from edgexpert.sim.perf.passes import Pass, PassCoster
    platform = config.platform
    coster = PassCoster(platform, bundled_spec().layout, cost_table={})
    nbytes = 1 << 20                                    # 4 tiles of half the 512 KiB SRAM
    fetch_s = nbytes / (platform.dram.peak_bytes_per_s * coster.seq[0])
    macs = fetch_s * platform.macs * platform.clock_hz * platform.compute_utilization
    p = Pass("plain", 1, 0.0, nbytes, 0.0, 0.0, {"projection": macs})
    cost = coster.cost(p)
    assert cost.fetch_s == pytest.approx(fetch_s)
    assert cost.compute_s == pytest.approx(fetch_s)
    # balanced: all but one tile overlaps
    assert cost.time_s == pytest.approx(fetch_s * (1 + 1 / 4))
    with pytest.raises(ValueError, match="accepted prefill, plain, draft, verify"):
        Pass("decode", 1, 0.0, 0.0, 0.0, 0.0, {})


def test_combined_on_a_full_size_model_streams_a_head_too_large_for_the_sram(config):
    from edgexpert.sim.perf.estimate import plan_step
    from edgexpert.sim.perf.models import model_spec
    from edgexpert.sim.perf.traffic import staging_bytes
    qwen = model_spec("qwen3-30b-a3b")
    row, = estimate(config, ["qwen3-30b-a3b"], ["combined"])
    # Qwen3's EAGLE-3 head is megabytes: the SRAM left by the landing buffer keeps weights
    assert row["resident_nonexpert_bytes"] == qwen.resident(
        config.platform.sram_bytes - staging_bytes(qwen, config))
    assert row["bytes_per_token"]["draft"] > 0
    assert any("the head does not fit on chip" in n for n in row["notes"])
    plan = plan_step(qwen, "combined", config)
    draft = next(p for p, _ in plan.passes if p.kind == "draft")
    runs = dict((p.kind, n) for p, n in plan.passes)
    assert runs["draft"] == config.policies.combined.depth and draft.resident_bytes == 0
    naive = plan_step(qwen, "naive_sd", config)
    verify = {p.kind: p for p, _ in plan.passes}["verify"]
    assert verify.expert_bytes < {p.kind: p for p, _ in naive.passes}["verify"].expert_bytes


def test_every_input_says_where_it_comes_from(results):
    from edgexpert.sim.perf.estimate import INPUT_KINDS
    for r in results:
        assert "tokens_per_step" in r["inputs"]
        for name, i in r["inputs"].items():
            assert i["kind"] in INPUT_KINDS and i["source"], (r["model"], r["policy"], name)
    by = {(r["model"], r["policy"]): r["inputs"] for r in results}
    # published with its draft where a paper measured it, else assumed and flagged
    assert by["qwen3-30b-a3b", "naive_sd"]["tokens_per_step"]["kind"] == "published"
    assert "EAGLE-3" in by["qwen3-30b-a3b", "naive_sd"]["tokens_per_step"]["source"]
    assert by["olmoe-1b-7b", "edgexpert"]["tokens_per_step"] == pytest.approx(
        {**by["olmoe-1b-7b", "edgexpert"]["tokens_per_step"], "value": 4.0})
    assert by["deepseek-v2-lite", "naive_sd"]["tokens_per_step"]["kind"] == "assumed"
    assert by["qwen3-30b-a3b", "naive_sd"]["verify_experts_per_layer"]["kind"] == "fitted"
    assert by["bundled", "naive_sd"]["tokens_per_step"]["kind"] == "measured"
    assert by["mixtral-8x7b", "ar"]["tokens_per_step"]["kind"] == "exact"


def test_the_qwen3_routing_is_validated_within_15_percent(results):
    row = next(r for r in results if (r["model"], r["policy"]) == ("qwen3-30b-a3b", "naive_sd"))
    checks = {v["figure"]: v for v in row["routing_model"]["validation"]}
    assert abs(checks["edgexpert_qwen3_experts"]["error"]) <= 0.15
    assert row["inputs"]["verify_experts_per_layer"]["value"] == pytest.approx(
        checks["edgexpert_qwen3_experts"]["modelled"], rel=0.05)
    assert checks["edgexpert_olmoe_acceptance"]["published"] == 4.0
    assert next(r for r in results if r["model"] == "bundled")["routing_model"] is None


def test_sensitivity_moves_the_right_way_and_breaks_even_at_ar(config):
    from edgexpert.sim.perf.estimate import sensitivity
    rows = {r["policy"]: r for r in sensitivity(config, ["qwen3-30b-a3b"],
                                                ["ar", "naive_sd", "specter"],
                                                (2.0, 4.0, 6.0), (0.2, 0.6, 1.0))}
    naive = rows["naive_sd"]
    lat = [p["latency_s_per_token"] for p in naive["by_acceptance"]]
    assert lat[0] > lat[1] > lat[2]                       # more tokens per step, less per token
    share = [p["latency_s_per_token"] for p in naive["by_share"]]
    assert share[0] < share[1] < share[2]                 # more experts, more time
    be = naive["break_even_tokens_per_step"]
    assert 1 < be < 7
    from edgexpert.sim.perf.estimate import plan_step
    # at the break-even the policy costs what plain decoding does
    assert rows["ar"]["by_acceptance"] == [] and rows["ar"]["break_even_tokens_per_step"] is None
    assert [p["tokens_per_step"] for p in rows["specter"]["by_acceptance"]] == [2.0]
    assert plan_step is not None and naive["ar_latency_s_per_token"] == pytest.approx(
        rows["ar"]["latency_s_per_token"])
    crossing = sensitivity(config, ["qwen3-30b-a3b"], ["naive_sd"], (be,), (1.0,))[0]
    assert crossing["by_acceptance"][0]["latency_s_per_token"] == pytest.approx(
        naive["ar_latency_s_per_token"], rel=1e-3)


def test_bad_sensitivity_axes_are_one_line_with_the_range(config):
    from edgexpert.contracts.errors import InputError
    from edgexpert.sim.perf.estimate import sensitivity
    with pytest.raises(InputError, match=r"tokens per step \(--acceptance\) 9 is out of range: "
                                         r"accepted 1\.\.7"):
        sensitivity(config, ["qwen3-30b-a3b"], ["naive_sd"], (2.0, 9.0))
    with pytest.raises(InputError, match=r"share \(--share\) 1.5 is out of range"):
        sensitivity(config, ["qwen3-30b-a3b"], ["naive_sd"], (2.0,), (1.5,))


def test_compute_utilization_and_control_power_are_settings(config):
    """platform.compute_utilization divides the compute time; platform.control_power_w
    multiplies the control energy; both keep their cited defaults (0.8, 5 % of 1.52 W)."""
    from edgexpert.contracts.config import load_config
    from edgexpert.sim.perf.models import bundled_spec
    from edgexpert.sim.perf.passes import Pass, PassCoster
    assert (config.platform.compute_utilization, config.platform.control_power_w) == (0.8, 0.076)
    p = Pass("prefill", 16, 0.0, 4096, 0.0, 0.0, {"projection": 1e9})
    layout = bundled_spec().layout
    base = PassCoster(config.platform, layout, cost_table={}).cost(p)
    other = load_config(overrides=["platform.compute_utilization=0.4",
                                   "platform.control_power_w=0.152"]).platform
    moved = PassCoster(other, layout, cost_table={}).cost(p)
    assert moved.compute_s == pytest.approx(2 * base.compute_s)
    assert moved.energy_j["control"] == pytest.approx(2 * base.energy_j["control"] * moved.time_s
                                                    / base.time_s)


def test_names_of_choices_are_taken_in_any_case():
    from edgexpert.contracts.config import ConfigError, load_config
    assert load_config(overrides=["platform.dram.type=lpddr5",
                                  "platform.dram.data_rate_mtps=6400"]).platform.dram.type == "LPDDR5"
    assert load_config(overrides=["platform.dram.type=Lpddr4x"]).platform.dram.type == "LPDDR4X"
    with pytest.raises(ConfigError, match="platform.dram.type = 'ddr4' is not accepted: "
                                          "accepted LPDDR4X, LPDDR5"):
        load_config(overrides=["platform.dram.type=ddr4"])
