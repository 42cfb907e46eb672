"""Checkpoint files: atomic (a crash mid-save leaves the previous one), the last N kept, safe to load."""

from __future__ import annotations

import json
import os
import pickle
from pathlib import Path

import numpy as np
import pytest

import rollcli.train.checkpoint as ckpt_mod
from rollcli.jobs.train import run_train_job
from rollcli.testing.train_jobs import write_job
from rollcli.train import list_checkpoints, load_latest_checkpoint, save_checkpoint


def save(job: Path, step: int, **kw: object) -> Path:
    backend = {"theta": np.arange(3.0) + step, "rng": {"state": 2**70 + step}}
    return save_checkpoint(job, step=step, loop={"step": step}, allocator={"a": [step]},
                           backend=backend, **kw)  # fmt: skip


def test_round_trip_and_keep_last_two(tmp_path: Path) -> None:
    for step in (1, 2, 3):
        save(tmp_path, step)
    assert [s for s, _ in list_checkpoints(tmp_path)] == [2, 3]
    ckpt = load_latest_checkpoint(tmp_path)
    assert ckpt is not None and ckpt.step == 3 and ckpt.allocator == {"a": [3]}
    np.testing.assert_array_equal(ckpt.backend["theta"], [3.0, 4.0, 5.0])
    assert ckpt.backend["rng"]["state"] == 2**70 + 3
    assert json.loads((ckpt.path / "loop.json").read_text())["loop"] == {"step": 3}
    save(tmp_path, 4, keep=1)
    assert [s for s, _ in list_checkpoints(tmp_path)] == [4]
    assert load_latest_checkpoint(tmp_path / "nothing-here") is None


def test_a_crash_mid_save_leaves_the_previous_checkpoint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    save(tmp_path, 1)

    def dies(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt("killed while writing loop.json")

    monkeypatch.setattr(ckpt_mod, "atomic_write_json", dies)
    with pytest.raises(KeyboardInterrupt):
        save(tmp_path, 2)
    monkeypatch.undo()
    assert [s for s, _ in list_checkpoints(tmp_path)] == [1]
    assert sorted(p.name for p in (tmp_path / "checkpoints").iterdir()) == ["step_00000001"]
    # a leftover temporary folder from a hard kill is ignored, then cleaned by the next save
    (tmp_path / "checkpoints" / ".step_00000002.abc.tmp").mkdir()
    (tmp_path / "checkpoints" / ".step_00000002.abc.tmp" / "backend.pkl").write_bytes(b"torn")
    assert load_latest_checkpoint(tmp_path).step == 1  # type: ignore[union-attr]
    save(tmp_path, 2)
    assert sorted(p.name for p in (tmp_path / "checkpoints").iterdir()) == [
        "step_00000001",
        "step_00000002",
    ]


def test_pickles_that_would_run_code_are_refused(tmp_path: Path) -> None:
    path = save(tmp_path, 1)
    (path / "backend.pkl").write_bytes(pickle.dumps(os.system))
    with pytest.raises(pickle.UnpicklingError, match="not allowed"):
        load_latest_checkpoint(tmp_path)


def test_sim_checkpoint_is_torch_free(tmp_path: Path) -> None:
    job = write_job(tmp_path / "j", steps=2)
    run_train_job(job)
    ckpt = load_latest_checkpoint(job)
    assert ckpt is not None and ckpt.step == 2 and ckpt.loop["step"] == 2
    assert b"torch" not in (ckpt.path / "backend.pkl").read_bytes()
    assert ckpt.allocator["kind"] == "uniform"
    assert ckpt.backend["version"] == 2
