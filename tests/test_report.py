"""`edgexpert report`: the page gathers what build/ holds and names the command for what it
does not."""

import json
import os
import subprocess
import sys
from pathlib import Path

EDGEXPERT = Path(sys.executable).parent / "edgexpert"


def report(build: Path) -> str:
    proc = subprocess.run([str(EDGEXPERT), "report"], capture_output=True, text=True,
                          env={**os.environ, "EDGEXPERT_BUILD_DIR": str(build)})
    assert proc.returncode == 0, proc.stderr
    return (build / "report" / "report.md").read_text()


def test_an_empty_build_names_the_commands_and_still_estimates(tmp_path):
    page = report(tmp_path)
    for command in ("edgexpert synth --all", "edgexpert bench ema", "edgexpert compare",
                    "edgexpert sweep --grid"):
        assert f"Not measured yet: run `{command}" in page
    # the estimate runs whatever build/ holds: every report model, synthetic routing
    assert "| qwen3-30b-a3b | edgexpert | synthetic |" in page
    assert "| bundled | ar | synthetic |" in page
    assert (tmp_path / "report" / "estimate.png").read_bytes().startswith(b"\x89PNG")
    # the sensitivity: break-even per model and policy, the validation, its plot
    assert "| qwen3-30b-a3b | naive_sd | 4.30 |" in page and "edgexpert_qwen3_experts" in page
    assert (tmp_path / "report" / "sensitivity.png").read_bytes().startswith(b"\x89PNG")


def test_measured_policies_are_tabled_and_priced_as_traces(tmp_path):
    ar = {"tokens": 10, "steps": 10, "tokens_per_step": 1.0, "passes_per_token": 1.0,
          "total_bytes_per_token": 1_900_000, "expert_bytes_per_token": 305_152,
          "nonexpert_bytes_per_token": 1_095_874, "kv_bytes_per_token": 500_000,
          "top1_agreement": 1.0, "ppl_ratio": 1.0,
          "pass_kinds": {"ar": {"runs_per_step": 1.0, "tokens": 1.0, "context": 100.0,
                                "expert_bytes": 305_152.0}}}
    (tmp_path / "compare").mkdir()
    (tmp_path / "compare" / "compare.json").write_text(json.dumps(
        {"policies": {"ar": ar}, "prompts": 8, "windows": 8}))
    page = report(tmp_path)
    assert "| ar | 1.00 | 1.00 | 1,900,000 | 305,152 | 1,095,874 | 500,000 | 1.000 | 1.000 |" in page
    assert "| bundled | ar | trace |" in page and "| bundled | naive_sd | synthetic |" in page
