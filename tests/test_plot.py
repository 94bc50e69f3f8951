"""The trade-off plot: a PNG with a point per result, the same bytes for the same results."""

from edgexpert.cli.plot import tradeoff_plot

RESULTS = {"naive_sd": {"total_bytes_per_token": 750_000, "top1_agreement": 1.0},
           "edgexpert": {"total_bytes_per_token": 650_000, "top1_agreement": 0.9}}


def test_plot_is_a_repeatable_png(tmp_path):
    first = tradeoff_plot(RESULTS, tmp_path / "a" / "plot.png", "title").read_bytes()
    again = tradeoff_plot(RESULTS, tmp_path / "b.png", "title").read_bytes()
    assert first.startswith(b"\x89PNG") and first == again
    moved = {**RESULTS, "edgexpert": {"total_bytes_per_token": 600_000, "top1_agreement": 0.9}}
    assert tradeoff_plot(moved, tmp_path / "c.png", "title").read_bytes() != first
