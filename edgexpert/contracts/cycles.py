"""The cycle file of `edgexpert bench top` (docs/blocks/top.md, "Cycle file"): what the
accelerator top's whole-step and prefill runs measured, per run and pass, in the form the
performance model calibrates on (`edgexpert estimate --calibrate`). Built from the top bench's
report; read by sim/perf and the command line, so it lives beside the trace format, not in the
bench."""

from __future__ import annotations

__all__ = ["CYCLES_FORMAT", "CYCLES_VERSION", "TOP_MASKS", "by_kind", "peak_macs_per_cycle",
           "against_whole_experts", "SPLIT_PARTS", "split", "split_by_kind", "cycle_file",
           "runs_summary", "prefill_cycles"]

#: where a layer's cycles went (`timeline`), in the order they fall in the layer
SPLIT_PARTS = ("head", "bus", "gaps", "tail")

#: the cycle file's format and version (docs/blocks/top.md, "Cycle file")
CYCLES_FORMAT, CYCLES_VERSION = "edgexpert-top-cycles", 1
#: the top bench's runs, a run of the cycle file per masks and pauses ("dcu/none"): where the
#: channel masks come from: every channel (naive speculative decoding, the host's masks),
#: EdgeXpert's selection computed by the host (golden's, golden/blocks/dcu.py, in EMA
#: descriptors), or the DCU in the top (the host sends DCU jobs: GATE_UP jobs whole, DOWN jobs'
#: headers; `dcu` issues each group's DOWN job after the next groups' GATE_UP jobs,
#: `dcu_inline` right after its own); the last three select the same channels (golden's)
TOP_MASKS = ("naive_sd", "edgexpert", "dcu", "dcu_inline")


def by_kind(passes: list[dict]) -> dict:
    """Per pass kind: passes, and the mean per pass of cycles, memory wait, compute, MACs;
    MACs per cycle over the kind's passes."""
    out = {}
    for kind in sorted({p["kind"] for p in passes}):
        ps = [p for p in passes if p["kind"] == kind]
        busy = sum(p["busy"] for p in ps)
        out[kind] = {"passes": len(ps),
                     **{f"{k}_per_pass": round(sum(p[k] for p in ps) / len(ps), 1)
                        for k in ("busy", "memory_wait", "compute", "descriptor_wait",
                                  "feedback_wait", "macs", "groups", "beats")},
                     "macs_per_cycle": round(sum(p["macs"] for p in ps) / busy, 3)}
    return out


def peak_macs_per_cycle(hw: dict) -> int:
    """The engine's peak: its GATE_UP and DOWN arrays run at once on consecutive groups, each
    `lanes` x `candidates` multipliers (a weight chunk times every candidate of a full group,
    docs/blocks/engine.md "Organisation of the MAC arrays")."""
    return 2 * hw["lanes"] * hw["candidates"]


def against_whole_experts(runs: dict) -> dict:
    """Per masked run (masks other than naive_sd) with a naive_sd run of the same pauses: the
    AXI beats and busy cycles its masks saved, and the share of the beat saving that became a
    cycle saving (cycles saved / beats saved: 1 when every saved beat is a saved cycle, as on a
    top that waits on its memory)."""
    out = {}
    for name, run in runs.items():
        whole = runs.get(f"naive_sd/{run['pauses']}")
        if run["masks"] == "naive_sd" or whole is None:
            continue
        beats, cycles = whole["beats"] - run["beats"], whole["cycles"] - run["cycles"]
        out[name] = {"beats_saved": beats, "cycles_saved": cycles,
                     "cycles_saved_per_beat_saved": round(cycles / beats, 3) if beats else None}
    return out


def split(layers: list[dict]) -> dict:
    """The layers' timeline entries summed: `head`, `bus`, `gaps`, `tail` (`SPLIT_PARTS`), their
    sum `span` and each one's share of it."""
    parts = {k: sum(e[k] for e in layers) for k in SPLIT_PARTS}
    span = sum(parts.values())
    return {**parts, "span": span, "shares": {k: round(v / span, 4) for k, v in parts.items()}}


def split_by_kind(layers: list[dict]) -> dict:
    """`split` per pass kind (draft, verify), with the kind's number of layers."""
    out = {}
    for kind in sorted({e["kind"] for e in layers}):
        of_kind = [e for e in layers if e["kind"] == kind]
        out[kind] = {"layers": len(of_kind), **split(of_kind)}
    return out


def timeline(test: dict) -> dict:
    """Where a run's cycles went, from its layers' timeline entries (the bench's
    `layer_timeline`): per layer and summed, the cycles before its first AXI beat (`head`),
    with a beat (`bus`), between beats without one (`gaps`) and after its last (`tail`); and
    the beats per bin of `bin_cycles`. Empty for a report without them."""
    layers = test.get("layers")
    if not layers:
        return {}
    return {"split": split(layers), "layers": layers,
            "beats_per_bin": {"bin_cycles": test["bin_cycles"], "beats": test["beats_per_bin"]}}


def cycle_file(report: dict, hw: dict) -> dict:
    """The cycle file of a whole-step report: the hardware, and per masks every pass's counts
    (the performance model calibrates on these), each run's cycles per AXI beat (1 at the
    bus's roofline, one beat per cycle) and MACs per cycle against the engine's peak, and the
    masked runs' savings against whole experts; the words fed to the engine, per beat and the
    cycles per word (1 at the single word stream's pace)."""
    runs = {}
    peak = peak_macs_per_cycle(hw)
    for name, test in sorted(report["tests"].items()):
        _, masks, mode = name.split("/")
        runs[f"{masks}/{mode}"] = {
            "masks": masks, "pauses": mode, "cycles": test["cycles"],
            "memory_wait": test["memory_wait"], "compute": test["compute"],
            "descriptor_wait": test["descriptor_wait"], "feedback_wait": test["feedback_wait"],
            "dcu_jobs": test["dcu_jobs"], "beats": test["beats"],
            "cycles_per_beat": round(test["cycles"] / test["beats"], 3),
            # the words the feeder handed the engine (one stream, a word a cycle at most): a
            # word fetched once and used by two depth groups counts twice
            "words": test["words"], "words_per_beat": round(test["words"] / test["beats"], 3),
            "cycles_per_word": round(test["cycles"] / test["words"], 3),
            "macs": test["macs"], "macs_per_cycle": test["macs_per_cycle"],
            "peak_macs_per_cycle": peak,
            "peak_share": round(test["macs_per_cycle"] / peak, 4), "groups": test["groups"],
            "candidates": test["candidates"], "steps": test["steps"],
            "by_kind": by_kind(test["passes"]), "memory": test["memory"],
            "passes": test["passes"], **timeline(test)}
    memory = report["memory"]
    return {"format": CYCLES_FORMAT, "version": CYCLES_VERSION, "hardware": hw,
            "memory": memory,
            "latency_cycles": report["latency"] if memory["memory"] == "latency" else None,
            "seed": report["seed"], "runs": runs, "against_whole_experts":
            against_whole_experts(runs)}


def runs_summary(cycles: dict) -> dict:
    """A cycle file's runs without their pass-by-pass, layer-by-layer and binned entries
    (what `bench top`'s summary shows)."""
    return {k: {key: v for key, v in run.items()
                if key not in ("passes", "layers", "beats_per_bin")}
            for k, run in cycles["runs"].items()}


def prefill_cycles(report: dict) -> dict:
    """The cycle file's `prefill` entry from a prefill bench report: per pause mode, the chunk's
    tokens, and per chunk-layer (mean over the layers) its cycles, the top's counters, the
    experts fetched, the engine groups and MACs, MACs per busy cycle, the replays, and every
    layer's entry."""
    out = {}
    for name, test in sorted(report["tests"].items()):
        layers = test["layers"]
        mean = {f"{k}_per_layer": round(sum(e[k] for e in layers) / len(layers), 1)
                for k in ("cycles", "busy", "memory_wait", "compute", "beats", "bytes",
                          "experts", "groups", "macs")}
        macs_per_cycle = sum(e["macs"] for e in layers) / sum(e["busy"] for e in layers)
        out[name.split("/")[1]] = {"tokens": test["tokens"], "layers": len(layers), **mean,
                                   "macs_per_cycle": round(macs_per_cycle, 3),
                                   "replays": test["replays"], "memory": test["memory"],
                                   "per_layer": layers}
    return out
