"""``rollcli plan`` output against saved files (regenerate with ROLLCLI_UPDATE_GOLDEN=1 after a
deliberate change, and review the diff)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "plan"


@pytest.mark.parametrize("name", ["sim", "verl"])
@pytest.mark.parametrize("fmt", ["txt", "json"])
def test_plan_output_matches_golden(cli, name, fmt, monkeypatch):
    monkeypatch.chdir(GOLDEN)
    args = ["plan", f"{name}.yaml"] + (["--json"] if fmt == "json" else [])
    result = cli(args)
    assert result.exit_code == 0, result.output
    expected_path = GOLDEN / f"{name}.{fmt}"
    output = result.stdout
    if fmt == "json":
        output = json.dumps(json.loads(output), indent=2, sort_keys=True) + "\n"
    if os.environ.get("ROLLCLI_UPDATE_GOLDEN") == "1":
        expected_path.write_text(output)
    assert output == expected_path.read_text(), f"plan output changed; see {expected_path}"
