"""Trace files: a written trace reads back identically, its loads follow the weight layout, and
every kind of damage is reported with the array's name."""

import json

import numpy as np
import pytest
import torch

from edgexpert.contracts.config import load_config
from edgexpert.contracts.trace import DECODE_KINDS, PassKind, TraceError, read_trace, write_trace
from edgexpert.golden.decoding.decode import FloatEngine, decode_speculative
from edgexpert.golden.integer.int_model import IntModel
from edgexpert.golden.lm.model import MoEModel
from edgexpert.golden.traces.decode_trace import build_trace

DECODE = ["decode.max_new_tokens=6", "decode.max_depth=3", "decode.max_candidates=8",
          "decode.width=3", "decode.branch=2"]


@pytest.fixture(scope="module")
def trace_file(tmp_path_factory, small_model):
    config = load_config(overrides=small_model + DECODE)
    torch.manual_seed(2)
    model = MoEModel(config.model).eval()
    engine = IntModel(model)
    runs = [decode_speculative(engine, p, config.decode, keep_traces=True) for p in ([1, 2, 3], [9])]
    trace = build_trace(runs, config.model, config.decode, {"test": True})
    path = write_trace(trace, tmp_path_factory.mktemp("t") / "run.npz")
    return path, trace, runs, model


def test_round_trip(trace_file):
    path, trace, runs, _ = trace_file
    back = read_trace(path)
    assert back.header == json.loads(json.dumps(trace.header))
    for name, a in trace.arrays.items():
        assert np.array_equal(back[name], a), name
    passes = sum(len(r.traces) for r in runs)
    assert len(np.unique(back["row_prompt"] * 1000 + back["row_pass"])) == passes



def test_pass_kinds_keep_their_disk_values(trace_file):
    # docs/traces.md: row_kind 1 autoregressive, 2 draft, 3 verification; prefill never stored
    assert {k.label: int(k) for k in PassKind} == {"ar": 1, "draft": 2, "verify": 3, "prefill": 4}
    assert DECODE_KINDS == (PassKind.AR, PassKind.DRAFT, PassKind.VERIFY)
    _, trace, runs, _ = trace_file
    for index, p in enumerate(runs[0].traces):
        rows = (trace["row_prompt"] == 0) & (trace["row_pass"] == index)
        assert set(trace["row_kind"][rows].tolist()) == {p.kind}, index
    assert set(trace["row_kind"].tolist()) == {PassKind.DRAFT, PassKind.VERIFY}

def test_rows_are_the_integer_path_values(trace_file):
    _, trace, runs, _ = trace_file
    first = runs[0].traces[-1]  # a verification pass
    rows = (trace["row_prompt"] == 0) & (trace["row_pass"] == len(runs[0].traces) - 1) & (trace["row_layer"] == 1)
    assert np.array_equal(trace["x_q"][rows], first.layers[1].int_data["x8"].numpy())
    assert np.array_equal(trace["moe_out_q16"][rows], first.layers[1].int_data["moe_out_q16"].numpy())
    hidden = trace["hidden_q"][rows]
    used = trace["experts"][rows] >= 0
    assert np.all(hidden[~used] == 0) and np.abs(hidden[used]).max(-1).min() == 127
    # the MoE output is the weighted sum of the expert outputs, with the contract's rounding
    out, w = trace["expert_out_q16"][rows].astype(np.int64), trace["weights_q16"][rows].astype(np.int64)
    summed = ((out * w[..., None] + (1 << 15)) >> 16).sum(1)
    assert np.array_equal(summed, trace["moe_out_q16"][rows])


def test_loads_follow_the_layout(trace_file):
    _, trace, _, _ = trace_file
    layout = trace.layout
    # naive fetching: every load is a whole expert, once per pass, layer and expert
    assert np.all(trace["load_bytes"] == layout.expert_fetch_bytes)
    keys = list(zip(trace["load_prompt"], trace["load_pass"], trace["load_layer"], trace["load_expert"]))
    assert len(keys) == len(set(keys))
    assert np.all(np.unpackbits(trace["mask_gate_up"], axis=1)[:, :layout.d_model] == 1)


def test_float_path_cannot_make_traces(trace_file, small_model):
    *_, model = trace_file
    config = load_config(overrides=small_model + DECODE)
    run = decode_speculative(FloatEngine(model), [1, 2], config.decode, keep_traces=True)
    with pytest.raises(TraceError, match="integer path"):
        build_trace([run], config.model, config.decode, {})


def _damaged(tmp_path, trace, **changes):
    arrays = dict(trace.arrays)
    header = dict(trace.header)
    for name, value in changes.items():
        if name == "header":
            header = value
        elif value is None:
            del arrays[name]
        else:
            arrays[name] = value
    path = tmp_path / "bad.npz"
    with open(path, "wb") as f:
        np.savez(f, header=np.frombuffer(json.dumps(header).encode(), np.uint8), **arrays)
    return path


@pytest.mark.parametrize("change, message", [
    (lambda t: {"x_q": None}, "array 'x_q' is missing"),
    (lambda t: {"x_q": t["x_q"].astype(np.int16)}, "array 'x_q' is int16"),
    (lambda t: {"experts": t["experts"][:, :1]}, r"array 'experts' is int16\[\d+, 1\]: accepted int16\[\d+, 2\]"),
    (lambda t: {"experts": np.full_like(t["experts"], 8)}, "array 'experts' holds 8..8: accepted -1..7"),
    (lambda t: {"row_kind": np.zeros_like(t["row_kind"])}, "array 'row_kind' holds 0..0: accepted 1..3"),
    (lambda t: {"row_kind": np.full_like(t["row_kind"], PassKind.PREFILL)},
     "array 'row_kind' holds 4..4: accepted 1..3"),
    (lambda t: {"header": {**t.header, "version": 99}}, "schema 'edgexpert-trace' version 99"),
    (lambda t: {"extra": np.zeros(3)}, r"unknown arrays \['extra'\]"),
])
def test_damage_is_named(tmp_path, trace_file, change, message):
    _, trace, _, _ = trace_file
    with pytest.raises(TraceError, match=message):
        read_trace(_damaged(tmp_path, trace, **change(trace)))


def test_not_a_trace(tmp_path):
    (tmp_path / "x.npz").write_bytes(b"not a zip")
    with pytest.raises(TraceError, match="is not a trace file"):
        read_trace(tmp_path / "x.npz")
