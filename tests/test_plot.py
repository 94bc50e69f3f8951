"""The trade-off plot: a PNG with a point per result, the same bytes for the same results."""

from edgexpert.cli.plot import tradeoff_plot

RESULTS = {"naive_sd": {"ema_bytes_per_token_decode": 750_000, "top1_agreement": 1.0},
           "edgexpert": {"ema_bytes_per_token_decode": 650_000, "top1_agreement": 0.9}}


def test_plot_is_a_repeatable_png(tmp_path):
    first = tradeoff_plot(RESULTS, tmp_path / "a" / "plot.png", "title").read_bytes()
    again = tradeoff_plot(RESULTS, tmp_path / "b.png", "title").read_bytes()
    assert first.startswith(b"\x89PNG") and first == again
    moved = {**RESULTS, "edgexpert": {"ema_bytes_per_token_decode": 600_000, "top1_agreement": 0.9}}
    assert tradeoff_plot(moved, tmp_path / "c.png", "title").read_bytes() != first
