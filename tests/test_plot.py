"""The trade-off plot: a PNG with a point per result, the same bytes for the same results."""

from edgexpert.cli.plot import sensitivity_plot, timeline_plot, tradeoff_plot

RESULTS = {"naive_sd": {"total_bytes_per_token": 750_000, "top1_agreement": 1.0},
           "edgexpert": {"total_bytes_per_token": 650_000, "top1_agreement": 0.9}}


def test_plot_is_a_repeatable_png(tmp_path):
    first = tradeoff_plot(RESULTS, tmp_path / "a" / "plot.png", "title").read_bytes()
    again = tradeoff_plot(RESULTS, tmp_path / "b.png", "title").read_bytes()
    assert first.startswith(b"\x89PNG") and first == again
    moved = {**RESULTS, "edgexpert": {"total_bytes_per_token": 600_000, "top1_agreement": 0.9}}
    assert tradeoff_plot(moved, tmp_path / "c.png", "title").read_bytes() != first


SENSITIVITY = [
    {"model": "m", "policy": "ar", "ar_latency_s_per_token": 0.1, "by_acceptance": [],
     "by_share": [], "break_even_tokens_per_step": None},
    {"model": "m", "policy": "naive_sd", "ar_latency_s_per_token": 0.1,
     "by_acceptance": [{"tokens_per_step": a, "latency_s_per_token": 0.4 / a} for a in (2, 4)],
     "by_share": [{"share": x, "latency_s_per_token": 0.1 * x} for x in (0.5, 1.0)],
     "break_even_tokens_per_step": 4.0}]


def test_sensitivity_plot_is_a_repeatable_png(tmp_path):
    first = sensitivity_plot(SENSITIVITY, tmp_path / "a.png", "t").read_bytes()
    assert first.startswith(b"\x89PNG")
    assert sensitivity_plot(SENSITIVITY, tmp_path / "b.png", "t").read_bytes() == first


def _sweep_rows(energy: float) -> list[dict]:
    return [{"platform.dram.channels": c, "platform.clock_hz": f, "model": m, "policy": p,
             "latency_ms_per_token": 10 / c, "energy_mj_per_token": energy / c}
            for c in (1, 2) for f in ("8e8", "1e9") for m in ("a", "b")
            for p in ("naive_sd", "edgexpert")]


def test_sweep_plot_draws_energy_beside_latency_repeatably(tmp_path):
    from edgexpert.cli.plot import sweep_plot
    first = sweep_plot(_sweep_rows(5.0), ["platform.dram.channels"], tmp_path / "a.png", "t")
    again = sweep_plot(_sweep_rows(5.0), ["platform.dram.channels"], tmp_path / "b.png", "t")
    assert first.read_bytes().startswith(b"\x89PNG") and first.read_bytes() == again.read_bytes()
    # the same latencies with other energies: a different picture, so energy is drawn
    other = sweep_plot(_sweep_rows(7.0), ["platform.dram.channels"], tmp_path / "c.png", "t")
    assert other.read_bytes() != first.read_bytes()


def test_timeline_plot_is_a_repeatable_png_of_every_run(tmp_path, timed_run):
    runs = {"naive_sd/none": timed_run(0, 900), "edgexpert/none": timed_run(5000, 600)}
    first = timeline_plot(runs, tmp_path / "a.png", "t").read_bytes()
    assert first.startswith(b"\x89PNG")
    assert timeline_plot(runs, tmp_path / "b.png", "t").read_bytes() == first
    # a longer head in one layer: a different picture, so the layers are drawn
    runs["edgexpert/none"]["layers"][0]["head"] += 400
    second = timeline_plot(runs, tmp_path / "c.png", "t").read_bytes()
    assert second != first
    # the engine busier in one layer: its line is drawn
    runs["edgexpert/none"]["layers"][1]["compute"] //= 2
    assert timeline_plot(runs, tmp_path / "d.png", "t").read_bytes() != second
