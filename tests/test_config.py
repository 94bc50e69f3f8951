"""Configuration: defaults load, files override a subset, every bad value is one clear line."""

import pytest

from edgexpert.contracts.config import RENAMED, Config, ConfigError, load_config
from edgexpert.contracts.hardware import ema_parameters
from edgexpert.hw.ema import DEFAULTS


def test_defaults_load_and_validate():
    config = load_config()
    assert isinstance(config, Config)
    assert config.hardware.mac_lane.pairs_per_beat == 4
    assert config.model.top_k <= config.model.n_experts
    assert config.synth.clock_period_ns == 10.0
    assert config.synth.target_vdd_v == 1.0 and config.synth.activity_cycles == 2000
    assert config.synth.activity_operands == "uniform"
    assert load_config(overrides=["synth.activity_operands=gaussian"]).synth.activity_operands \
        == "gaussian"
    assert config.hardware.ema.axi_data_width == 256
    assert config.hardware.ema.outstanding_reads == 48


def test_file_overrides_only_its_keys(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("hardware:\n  mac_lane:\n    pairs_per_beat: 16\n")
    config = load_config(path)
    assert config.hardware.mac_lane.pairs_per_beat == 16
    assert config.model == load_config().model


def test_overrides_apply_after_file(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("synth:\n  clock_period_ns: 5\n")
    config = load_config(path, ["synth.clock_period_ns=2.5"])
    assert config.synth.clock_period_ns == 2.5
    assert isinstance(config.synth.clock_period_ns, float)


@pytest.mark.parametrize("override, message", [
    ("hardware.mac_lane.pairs_per_beat=0",
     "hardware.mac_lane.pairs_per_beat = 0 is out of range: accepted integers 1..64"),
    ("hardware.mac_lane.pairs_per_beat=65",
     "hardware.mac_lane.pairs_per_beat = 65 is out of range: accepted integers 1..64"),
    ("hardware.mac_lane.pairs_per_beat=true",
     "hardware.mac_lane.pairs_per_beat = True is not an integer: accepted integers 1..64"),
    ("hardware.mac_lane.pairs_per_beat=2.5",
     "hardware.mac_lane.pairs_per_beat = 2.5 is not an integer: accepted integers 1..64"),
    ("synth.clock_period_ns=fast",
     "synth.clock_period_ns = 'fast' is not a number: accepted values 0.5..1000.0"),
    ("synth.clock_period_ns=.nan",
     "synth.clock_period_ns = nan is out of range: accepted values 0.5..1000.0"),
    ("synth.target_vdd_v=1.2",
     "synth.target_vdd_v = 1.2 is out of range: accepted values 0.7..1.0"),
    ("synth.activity_cycles=8",
     "synth.activity_cycles = 8 is out of range: accepted integers 16..200000"),
    ("synth.activity_seed=-1",
     "synth.activity_seed = -1 is out of range: accepted integers 0..2147483647"),
    ("synth.default_activity=3",
     "synth.default_activity = 3 is out of range: accepted values 0.0..2.0"),
    ("synth.activity_operands=normal",
     "synth.activity_operands = 'normal' is not accepted: accepted uniform, gaussian"),
    ("synth.activity_operands=3",
     "synth.activity_operands = 3 is not accepted: accepted uniform, gaussian"),
    ("hardware.mac_lane.width=3",
     "hardware.mac_lane.width is not a known key: accepted pairs_per_beat"),
    ("model.top_k=33", "model.top_k = 33 is out of range: accepted 1..n_experts (n_experts = 32)"),
    ("model.n_heads=5", "model.n_heads = 5 does not divide model.d_model = 192"),
    ("hardware=3", "hardware must be a mapping, not int"),
    ("hardware.ema.axi_data_width=100",
     "hardware.ema.axi_data_width = 100 is not accepted: accepted 64, 128, 256"),
    ("hardware.ema.axi_data_width=true",
     "hardware.ema.axi_data_width = True is not accepted: accepted 64, 128, 256"),
    ("hardware.ema.axi_data_width=128.0",
     "hardware.ema.axi_data_width = 128.0 is not accepted: accepted 64, 128, 256"),
    ("hardware.ema.buffer_bytes=3000",
     "hardware.ema.buffer_bytes = 3000 is not accepted: accepted 1024, 2048, 4096, 8192, 16384, "
     "32768, 65536, 131072, 262144, 524288, 1048576"),
    ("hardware.ema.buffer_banks=3", "hardware.ema.buffer_banks = 3 is not accepted: accepted 1, 2, 4, 8"),
    ("hardware.ema.outstanding_reads=0",
     "hardware.ema.outstanding_reads = 0 is out of range: accepted integers 1..64"),
    ("hardware.ema.axi_addr_width=65",
     "hardware.ema.axi_addr_width = 65 is out of range: accepted integers 16..64"),
    ("nonsense", "override 'nonsense' is malformed: accepted KEY=VALUE"),
])
def test_bad_values_name_key_value_and_range(override, message):
    with pytest.raises(ConfigError) as info:
        load_config(overrides=[override])
    assert message in str(info.value)
    assert "\n" not in str(info.value)


def test_choices_accept_each_listed_value():
    for width in (64, 128, 256):
        config = load_config(overrides=[f"hardware.ema.axi_data_width={width}"])
        assert config.hardware.ema.axi_data_width == width


def test_malformed_files(tmp_path):
    bad_yaml = tmp_path / "bad.yaml"
    bad_yaml.write_text("hardware: [unclosed\n")
    with pytest.raises(ConfigError, match="bad.yaml is not valid YAML"):
        load_config(bad_yaml)
    a_list = tmp_path / "list.yaml"
    a_list.write_text("- 1\n- 2\n")
    with pytest.raises(ConfigError, match="must hold a mapping at the top, not list"):
        load_config(a_list)
    with pytest.raises(ConfigError, match="cannot read config"):
        load_config(tmp_path / "missing.yaml")


def test_config_is_immutable():
    config = load_config()
    with pytest.raises(AttributeError):
        config.hardware.mac_lane.pairs_per_beat = 8


def test_platform_defaults_are_edgexperts_point_and_rtl_yaml_is_ours():
    from dataclasses import asdict
    from importlib import resources

    from edgexpert.contracts.cycles import peak_macs_per_cycle

    p = load_config().platform
    assert (p.clock_hz, p.macs, p.mac_clusters, p.sram_bytes) == (800_000_000, 8192, 8, 524288)
    assert (p.dram.type, p.dram.channels, p.dram.data_rate_mtps) == ("LPDDR4X", 2, 4000)
    assert p.dram.peak_bytes_per_s == 16e9            # EdgeXpert's 16 GB/s
    rtl_yaml = resources.files("edgexpert.contracts").joinpath("configs/rtl.yaml")
    config = load_config(str(rtl_yaml))
    hw = config.hardware.ema
    # the RTL point is what hardware.* elaborates, and only platform changes
    assert (config.platform.ema_bus_bits, config.platform.ema_outstanding) == \
        (hw.axi_data_width, hw.outstanding_reads)
    assert (config.platform.sram_bytes, config.platform.sram_banks) == \
        (hw.buffer_bytes, hw.buffer_banks)
    # the engine's peak: both arrays, every candidate of a group at once
    assert config.platform.macs == peak_macs_per_cycle(asdict(config.hardware.engine)) == 512
    # the policies' on-chip shares fit its smaller SRAM: the estimate prices every model there
    # (until 2026-12-03 the bundled 480 + 32 KiB were refused against its 256 KiB)
    from edgexpert.sim.perf.estimate import estimate
    rows = estimate(config, ["bundled"], ["ar", "specmoe"])
    assert len(rows) == 2 and all(r["latency_s_per_token"] > 0 for r in rows)
    assert config.model == load_config().model and config.hardware == load_config().hardware


@pytest.mark.parametrize("override, message", [
    ("platform.clock_hz=0",
     "platform.clock_hz = 0 is out of range: accepted integers 1000000..5000000000"),
    ("platform.ema_bus_bits=512",
     "platform.ema_bus_bits = 512 is not accepted: accepted 64, 128, 256"),
    ("platform.ema_outstanding=65",
     "platform.ema_outstanding = 65 is out of range: accepted integers 1..64"),
    ("platform.macs=100",
     "platform.mac_clusters = 8 does not divide platform.macs = 100: accepted divisors of macs"),
    ("platform.dram.type=DDR4",
     "platform.dram.type = 'DDR4' is not accepted: accepted LPDDR4X, LPDDR5"),
    ("platform.dram.data_rate_mtps=6400",
     "platform.dram.data_rate_mtps = 6400 is out of range for LPDDR4X: accepted integers "
     "200..4266"),
    ("platform.dram.channels=0",
     "platform.dram.channels = 0 is out of range: accepted integers 1..16"),
    ("platform.dram.interleave_bytes=48",
     "platform.dram.interleave_bytes = 48 is not accepted: accepted 32, 64, 128, 256, 512, "
     "1024, 2048"),
])
def test_bad_platform_values_name_the_accepted_range(override, message):
    with pytest.raises(ConfigError) as info:
        load_config(overrides=[override])
    assert str(info.value) == message


def test_lpddr5_accepts_its_own_speed_bin():
    dram = load_config(overrides=["platform.dram.type=LPDDR5",
                                  "platform.dram.data_rate_mtps=6400"]).platform.dram
    assert dram.peak_bytes_per_s == 2 * 6400e6 * 2


def test_the_fine_model_brings_its_shape_under_the_users_own_values():
    fine = load_config(overrides=["model.name=fine"])
    assert (fine.model.n_experts, fine.model.top_k, fine.model.expert_ffn) == (64, 8, 32)
    # the active FFN is the coarse model's: both spend the same expert MACs per token
    coarse = load_config().model
    assert fine.model.top_k * fine.model.expert_ffn == coarse.top_k * coarse.expert_ffn
    assert load_config(overrides=["model.name=fine", "model.top_k=6"]).model.top_k == 6
    assert load_config().model.name == "coarse"
    # each model carries its own calibrated prefill point (`edgexpert calibrate prefill`), and a
    # user's value still wins over it
    assert (fine.policies.prefill.budget_minor, fine.policies.prefill.budget_trivial) == (7, 5)
    coarse_prefill = load_config().policies.prefill
    assert (coarse_prefill.budget_minor, coarse_prefill.budget_trivial) == (4, 3)
    assert load_config(overrides=["model.name=fine", "policies.prefill.budget_minor=6"]
                       ).policies.prefill.budget_minor == 6


def test_a_model_that_is_not_bundled_is_refused_by_name():
    with pytest.raises(ConfigError) as info:
        load_config(overrides=["model.name=huge"])
    assert str(info.value) == "model.name = 'huge' is not accepted: accepted coarse, fine"


def test_the_pruned_checkpoint_belongs_to_the_coarse_model():
    with pytest.raises(ConfigError) as info:
        load_config(overrides=["model.name=fine", "policies.pruned_checkpoint=bundled"])
    assert "not the fine model's: accepted none" in str(info.value)


@pytest.mark.parametrize("old, new", sorted(RENAMED.items()))
def test_a_flat_key_of_a_nested_section_names_its_new_key(tmp_path, old, new):
    """The flat keys the policies' sections replaced are refused with the new key, whether
    set with --set or in a file, never ignored."""
    with pytest.raises(ConfigError) as info:
        load_config(overrides=[f"{old}=1"])
    assert str(info.value) == f"{old} was renamed {new}"
    path = tmp_path / "c.yaml"
    path.write_text(f"policies:\n  {old.split('.')[1]}: 1\n")
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert str(info.value) == f"{old} was renamed {new}"


def test_nested_policy_sections_load_from_files_and_overrides(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("policies:\n  prefill:\n    chunk: 8\n  combined:\n    depth: 2\n")
    config = load_config(path, ["policies.specter.chain=3", "policies.s2moe.cap=6"])
    p = config.policies
    assert (p.prefill.chunk, p.combined.depth, p.specter.chain, p.s2moe.cap) == (8, 2, 3, 6)
    # the rest of each section keeps its defaults
    assert p.prefill.tau_major == 1.0 and p.combined.candidates == 8


def test_the_emas_own_defaults_are_the_bundled_configurations():
    """hw/ema's constructor defaults are written there (hw/ never reads the configuration):
    they must stay the bundled `hardware.ema`."""
    assert DEFAULTS == ema_parameters(load_config())
