"""Job labels in plan, status and live progress: a job on one of several base models says which."""

from __future__ import annotations

from rollcli.cli._render import job_label


def test_job_labels_name_the_base_model_when_the_spec_varies_it():
    assert job_label({"type": "train", "allocator": "pc", "seed": 0}) == "pc/0"
    assert job_label({"type": "train", "allocator": "pc", "seed": 0, "base_seed": 2}) == "pc/b2/s0"
    assert job_label({"type": "eval", "allocator": "pc", "seed": 1, "base_seed": 0}) == (
        "eval pc/b0/s1"
    )
    assert job_label({"type": "report", "allocator": None, "seed": None}) == "report"
