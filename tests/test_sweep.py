"""`edgexpert sweep`: the estimate over a grid on a local Dask cluster, and its bad input."""

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from edgexpert.contracts.config import load_config
from edgexpert.sim.perf.sweep import grid_points, parse_axes, parse_paired

EDGEXPERT = Path(sys.executable).parent / "edgexpert"


def run(*args, env=None):
    return subprocess.run([str(EDGEXPERT), *args], capture_output=True, text=True,
                          env={**os.environ, **(env or {})})


def test_axes_and_grid_order():
    axes = parse_axes(["platform.dram.channels=1,2", "policies.coalescing_ratio=0.5,0.75,1.0"])
    points = grid_points(axes, lambda overrides: load_config(overrides=overrides))
    assert [p.settings for p in points][:4] == [
        {"platform.dram.channels": "1", "policies.coalescing_ratio": "0.5"},
        {"platform.dram.channels": "1", "policies.coalescing_ratio": "0.75"},
        {"platform.dram.channels": "1", "policies.coalescing_ratio": "1.0"},
        {"platform.dram.channels": "2", "policies.coalescing_ratio": "0.5"}]
    assert len(points) == 6 and points[5].config.platform.dram.channels == 2
    assert points[5].config.policies.coalescing_ratio == 1.0
    for bad, message in ((["platform.dram.channels"], "accepted KEY=V1,V2"),
                         (["a=1", "a=2"], "names a twice"), ([], "at least one --grid"),
                         (["platform.dram.channels=1,,2"], "accepted KEY=V1,V2")):
        with pytest.raises(ValueError, match=message):
            parse_axes(bad)


def test_paired_axes_move_together_beside_the_grid():
    grid = parse_axes(["platform.dram.channels=1,2"])
    paired = parse_paired(["platform.dram.type=lpddr4x,LPDDR5",
                           "platform.dram.data_rate_mtps=4266,6400"], grid)
    points = grid_points(grid, lambda overrides: load_config(overrides=overrides), paired)
    # 2 channel counts x 2 paired points, not 2 x 2 x 2; the paired axis is the fastest
    assert [(p.config.platform.dram.channels, p.config.platform.dram.type,
             p.config.platform.dram.data_rate_mtps) for p in points] == [
        (1, "LPDDR4X", 4266), (1, "LPDDR5", 6400), (2, "LPDDR4X", 4266), (2, "LPDDR5", 6400)]
    # paired alone is a sweep; unequal counts and a key on both flags are one line each
    alone = grid_points({}, lambda overrides: load_config(overrides=overrides), paired)
    assert [p.settings["platform.dram.type"] for p in alone] == ["lpddr4x", "LPDDR5"]
    with pytest.raises(ValueError, match="platform.dram.type 2, platform.dram.channels 3; "
                                         "accepted the same count"):
        parse_paired(["platform.dram.type=LPDDR4X,LPDDR5", "platform.dram.channels=1,2,4"], {})
    with pytest.raises(ValueError, match="both a --grid and a --paired axis"):
        parse_paired(["platform.dram.channels=1,2"], grid)


def test_a_small_grid_on_the_local_cluster(tmp_path):
    env = {"EDGEXPERT_BUILD_DIR": str(tmp_path)}
    proc = run("sweep", "--grid", "platform.dram.channels=1,2", "--model", "bundled", "--model",
        "olmoe-1b-7b", "--policy", "ar", "--policy", "naive_sd", "--workers", "1", "--json",
        "--synthetic", env=env)
    assert proc.returncode == 0, proc.stderr
    rows = json.loads(proc.stdout)
    assert [(r["platform.dram.channels"], r["model"], r["policy"]) for r in rows] == [
        (c, m, p) for c in ("1", "2") for m in ("bundled", "olmoe-1b-7b")
        for p in ("ar", "naive_sd")]
    by = {(r["platform.dram.channels"], r["model"], r["policy"]): r for r in rows}
    # twice the channels: a full-size model's bandwidth-bound token gets much faster
    assert by["2", "olmoe-1b-7b", "ar"]["latency_ms_per_token"] < \
        0.6 * by["1", "olmoe-1b-7b", "ar"]["latency_ms_per_token"]
    with (tmp_path / "sweep" / "sweep.csv").open() as f:
        table = list(csv.DictReader(f))
    assert len(table) == 8 and float(table[0]["latency_ms_per_token"]) == pytest.approx(
        rows[0]["latency_ms_per_token"])
    assert (tmp_path / "sweep" / "sweep.png").read_bytes().startswith(b"\x89PNG")


def test_bad_sweeps_are_one_line(tmp_path):
    env = {"EDGEXPERT_BUILD_DIR": str(tmp_path)}
    for args, message in ((["--grid", "platform.dram.channels=0"], "platform.dram.channels"),
                          (["--grid", "platform.dram.channels=1", "--model", "gpt"],
                           "accepted bundled"),
                          (["--grid", "platform.dram.channels=1", "--workers", "0"],
                           "accepted integers >= 1")):
        proc = run("sweep", *args, env=env)
        assert proc.returncode == 2 and message in proc.stderr
        assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
