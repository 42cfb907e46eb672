"""``launch.max_requeues`` and ``launch.signal_lead_s``: validated, and left out of the dumped
spec at their defaults (manifests and saved specs of earlier runs stay identical)."""

from __future__ import annotations

from pathlib import Path

import pytest

from rollcli.errors import SpecError
from rollcli.spec import load_spec

QUICKSTART = Path(__file__).resolve().parents[2] / "experiments" / "quickstart.yaml"


def test_defaults_are_not_dumped():
    launch = load_spec(QUICKSTART, []).to_dict()["launch"]
    assert "max_requeues" not in launch and "signal_lead_s" not in launch


def test_set_values_are_dumped_and_reach_the_executor_settings():
    spec = load_spec(QUICKSTART, ["launch.max_requeues=30", "launch.signal_lead_s=900"])
    assert spec.to_dict()["launch"]["max_requeues"] == 30
    assert spec.launch.model_dump()["signal_lead_s"] == 900


@pytest.mark.parametrize("override", ["launch.max_requeues=-1", "launch.signal_lead_s=10"])
def test_bad_values_name_the_field(override):
    with pytest.raises(SpecError, match=override.split("=")[0]):
        load_spec(QUICKSTART, [override])
