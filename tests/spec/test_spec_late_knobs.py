"""Knobs added after specs were written (``LATE_KNOBS`` on a backend or allocator config) stay
out of dumped specs at their defaults: one declaration per config, checked for every shipped
backend and allocator, and the job ids of every shipped spec and sweep pinned in a saved file
(regenerate with ROLLCLI_UPDATE_GOLDEN=1 only after a deliberate change to what jobs compute,
and say so in docs/LOG.md: a changed id makes existing run directories lose their jobs)."""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path
from typing import ClassVar

import pytest

from rollcli.plan import build_plan
from rollcli.spec import load_spec
from rollcli.spec.models import (
    allocator_config_classes,
    backend_config_classes,
    late_knob_defaults,
    omit_late_knobs,
)
from rollcli.sweep.file import load_sweep_file
from rollcli.sweep.plan import plan_sweep

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = ROOT / "tests" / "golden" / "plan" / "job_ids.json"
# every shipped spec and sweep but vigor-sample (34 sampled points of knobs that are not late:
# one second of the test for nothing the others do not cover)
SPECS = [*sorted((ROOT / "experiments").glob("*.yaml")), *sorted(GOLDEN.parent.glob("*.yaml"))]
SWEEPS = [p for p in sorted((ROOT / "sweeps").glob("*.yaml")) if p.stem != "vigor-sample"]


def test_every_component_declares_late_knobs_with_defaults():
    classes = {**backend_config_classes(), **allocator_config_classes()}
    assert {"sim", "tiny", "verl", "pilot_commit"} <= set(classes)
    declared = {kind: late_knob_defaults(cls) for kind, cls in classes.items()}
    assert declared["sim"] == {"overlong_buffer_len": 0, "overlong_penalty_factor": 1.0}
    assert declared["verl"]["reward_deadline_s"] == 10.0 and declared["verl"]["format_score"] == 0.0
    assert declared["pilot_commit"] == {"epoch_resets_rounds": False}
    assert omit_late_knobs(
        classes["pilot_commit"], {"n_pilot": 4, "epoch_resets_rounds": True}
    ) == {
        "n_pilot": 4,
        "epoch_resets_rounds": True,
    }


def test_a_late_knob_without_a_plain_default_is_a_declaration_error():
    @dataclasses.dataclass(frozen=True)
    class Bad:
        LATE_KNOBS: ClassVar[tuple[str, ...]] = ("missing",)
        n: int = 1

    with pytest.raises(TypeError, match="Bad.LATE_KNOBS names 'missing'"):
        late_knob_defaults(Bad)


def test_shipped_specs_keep_their_job_ids():
    ids = {
        str(p.relative_to(ROOT)): sorted(j.id for j in build_plan(load_spec(p, []))) for p in SPECS
    }
    for p in SWEEPS:
        ids[str(p.relative_to(ROOT))] = sorted(j.id for j in plan_sweep(load_sweep_file(p)).plan)
    if os.environ.get("ROLLCLI_UPDATE_GOLDEN") == "1":
        GOLDEN.write_text(json.dumps(ids, indent=1, sort_keys=True) + "\n")
    assert ids == json.loads(GOLDEN.read_text()), f"job ids changed; see {GOLDEN}"
