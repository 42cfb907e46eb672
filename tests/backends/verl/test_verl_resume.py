"""verl's ``latest_checkpointed_iteration.txt`` is checked before a resume trusts it (issue 26)."""

from __future__ import annotations

import logging

import pytest

from rollcli.backends.verl.resume import TRACKER, trusted_latest_step


def _job(tmp_path, steps_on_disk, tracker):
    root = tmp_path / "checkpoints"
    for step in steps_on_disk:
        (root / f"global_step_{step}" / "actor").mkdir(parents=True)
    (root / "global_step_7").mkdir(parents=True, exist_ok=True)  # torn: no actor/
    if tracker is not None:
        (root / TRACKER).write_text(tracker)
    return tmp_path


@pytest.mark.parametrize("tracker", [str(10**15), "-3", "abc", "7", "1e9", "6 " * 10_000])
def test_a_bad_tracker_falls_back_to_the_newest_complete_checkpoint(tmp_path, tracker, caplog):
    job = _job(tmp_path, [2, 4, 6, 12], tracker)
    with caplog.at_level(logging.WARNING):
        assert trusted_latest_step(job, max_step=10) == 6  # 12 is past budget.steps
    assert (job / "checkpoints" / TRACKER).read_text() == "6"
    assert any("resuming from global_step_6" in r.getMessage() for r in caplog.records)


def test_a_good_tracker_is_kept_and_none_means_fresh(tmp_path):
    job = _job(tmp_path / "a", [2, 4], "2")
    assert trusted_latest_step(job, max_step=10) == 2  # an older step named on purpose: kept
    assert trusted_latest_step(_job(tmp_path / "b", [2], None), max_step=10) == 0
    fresh = _job(tmp_path / "c", [], "99")
    assert trusted_latest_step(fresh, max_step=10) == 0
    assert not (fresh / "checkpoints" / TRACKER).exists()
