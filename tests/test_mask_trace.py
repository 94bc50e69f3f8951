"""Mask traces: the file format round-trips, bad files name the place."""

import json

import pytest

from edgexpert.contracts.mask_trace import (MaskEntry, MaskTrace, MaskTraceError, read_mask_trace,
                                  write_mask_trace)
from edgexpert.contracts.weight_layout import Matrix, WeightLayout

LAYOUT = WeightLayout(n_layers=3, n_experts=8, d_model=64, expert_ffn=48)


def test_round_trip(tmp_path):
    trace = MaskTrace("golden: test", {"n_layers": 3, "n_experts": 8, "d_model": 64,
                                       "expert_ffn": 48, "n_shared_experts": 0},
                      ((MaskEntry(0, 2, Matrix.GATE_UP, (0, 1, 5)), MaskEntry(0, 2, Matrix.DOWN, (47,))),
                       (MaskEntry(2, 7, Matrix.GATE_UP, tuple(range(64))),)))
    path = tmp_path / "t.json"
    write_mask_trace(path, trace)
    assert read_mask_trace(path, LAYOUT) == trace
    assert json.loads(path.read_text())["source"] == "golden: test"
    assert trace.layout() == LAYOUT


def _file(tmp_path, **change):
    data = {"format": "edgexpert-mask-trace", "version": 1, "source": "golden",
            "model": {"n_layers": 3, "n_experts": 8, "d_model": 64, "expert_ffn": 48,
                      "n_shared_experts": 0},
            "steps": [[{"layer": 1, "expert": 2, "matrix": "DOWN", "channels": [0, 5, 47]}]]}
    data.update(change)
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data))
    return path


def _entry(**change):
    entry = {"layer": 1, "expert": 2, "matrix": "DOWN", "channels": [0, 5, 47]}
    entry.update(change)
    return [[entry]]


@pytest.mark.parametrize("change, message", [
    ({"format": "other"}, "format = 'other': accepted 'edgexpert-mask-trace'"),
    ({"version": 2}, "version = 2: accepted 1"),
    ({"source": ""}, "source must be a non-empty string"),
    ({"model": {"n_layers": 3}}, "model must be an object with exactly the keys"),
    ({"steps": {}}, "steps must be a list, not dict"),
    ({"steps": _entry(layer=3)}, r"steps\[0\]\[0\].layer = 3 is out of range: accepted 0..2"),
    ({"steps": _entry(expert=-1)}, r"steps\[0\]\[0\].expert = -1 is out of range: accepted 0..7"),
    ({"steps": _entry(matrix="UP")}, r"steps\[0\]\[0\].matrix = 'UP': accepted GATE_UP, DOWN"),
    ({"steps": _entry(channels=[0, 48])},
     r"steps\[0\]\[0\].channels\[1\] = 48 is out of range: accepted 0..47"),
    ({"steps": _entry(channels=[5, 5])},
     r"steps\[0\]\[0\].channels\[1\] = 5 follows 5: channels must be ascending"),
    ({"steps": _entry(channels=[1.5])}, r"channels\[0\] = 1.5 is not an integer"),
    ({"steps": [[{"layer": 0}]]}, "must be an object with exactly the keys"),
])
def test_bad_files_name_the_place(tmp_path, change, message):
    with pytest.raises(MaskTraceError, match=message):
        read_mask_trace(_file(tmp_path, **change))


def test_trace_for_another_model_and_unreadable_files(tmp_path):
    with pytest.raises(MaskTraceError, match="made for d_model = 64, the layout has 32"):
        read_mask_trace(_file(tmp_path), WeightLayout(3, 8, 32, 48))
    (tmp_path / "broken.json").write_text("{")
    with pytest.raises(MaskTraceError, match="broken.json is not valid JSON"):
        read_mask_trace(tmp_path / "broken.json")
    with pytest.raises(MaskTraceError, match="cannot read mask trace"):
        read_mask_trace(tmp_path / "missing.json")
    assert read_mask_trace(_file(tmp_path)).steps[0][0].matrix == Matrix.DOWN
