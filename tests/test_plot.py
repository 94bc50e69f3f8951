"""The trade-off plot: a PNG with a point per result, the same bytes for the same results."""

from edgexpert.cli.plot import sensitivity_plot, tradeoff_plot

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
