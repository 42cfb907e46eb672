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


class _Exploit:
    """Unpickling this runs ``touch <path>``: the proof that a loader executed code."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __reduce__(self):  # noqa: ANN204
        return (os.system, (f"touch {self.path}",))


def test_crafted_files_never_run_code_and_fall_back(tmp_path: Path, caplog) -> None:
    """Every file a loader reads, replaced by a crafted one: nothing runs, the previous
    checkpoint is used, a one-line warning names the file."""
    proof = tmp_path / "pwned"
    exploit = pickle.dumps(_Exploit(proof))
    crafted = {
        "backend.npz": lambda d: np.savez(  # an object array: pickled inside the npz
            d / "backend.npz", a0=np.array([_Exploit(proof)], dtype=object)
        ),
        "backend.npz (raw pickle)": lambda d: (d / "backend.npz").write_bytes(exploit),
        "backend.json": lambda d: (d / "backend.json").write_text(
            '{"format": 1, "arrays": 0, "state": {"__rollcli__": "tensor", "key": "a0", "dtype": "os.system"}}'
        ),
        "loop.json (torn)": lambda d: (d / "loop.json").write_text('{"format": 2, "st'),
        "backend.pkl (old format)": lambda d: (
            (d / "backend.json").unlink(),
            (d / "backend.npz").unlink(),
            (d / "backend.pkl").write_bytes(exploit),
            (d / "loop.json").write_text('{"format": 1, "step": 2, "loop": {}, "allocator": {}}'),
        ),
    }
    for name, craft in crafted.items():
        job = tmp_path / name.replace(" ", "_")
        save(job, 1)
        craft(save(job, 2))
        caplog.clear()
        ckpt = load_latest_checkpoint(job)
        assert ckpt is not None and ckpt.step == 1, name  # the previous complete one
        np.testing.assert_array_equal(ckpt.backend["theta"], [1.0, 2.0, 3.0])
        assert not proof.exists(), name
        assert len(caplog.records) == 1 and "step_00000002" in caplog.records[0].getMessage()


def test_checkpoint_files_hold_no_pickle(tmp_path: Path) -> None:
    import torch

    state = {"w": torch.randn(2, 3), "bf": torch.ones(2, dtype=torch.bfloat16),
             "opt": {"state": {0: {"step": torch.tensor(1.0)}}, "groups": [(0.9, 0.99)]},
             "rng": np.random.default_rng(0).bit_generator.state, "n": np.int64(3)}  # fmt: skip
    path = save_checkpoint(tmp_path, step=1, loop={}, allocator={}, backend=state)
    for file in path.iterdir():
        assert b"\x80\x04" not in file.read_bytes()[:2] and file.suffix in (".json", ".npz")
    back = load_latest_checkpoint(tmp_path).backend  # type: ignore[union-attr]
    assert torch.equal(back["w"], state["w"]) and back["bf"].dtype == torch.bfloat16
    assert back["opt"]["state"][0]["step"].item() == 1.0 and back["opt"]["groups"] == [(0.9, 0.99)]
    assert back["rng"] == state["rng"] and back["n"] == 3 and back["n"].dtype == np.int64
    with pytest.raises(TypeError, match="not data"):
        save_checkpoint(tmp_path, step=2, loop={}, allocator={}, backend={"f": os.system})


def test_sim_checkpoint_is_torch_free(tmp_path: Path) -> None:
    job = write_job(tmp_path / "j", steps=2)
    run_train_job(job)
    ckpt = load_latest_checkpoint(job)
    assert ckpt is not None and ckpt.step == 2 and ckpt.loop["step"] == 2
    assert b"torch" not in (ckpt.path / "backend.json").read_bytes()
    assert ckpt.allocator["kind"] == "uniform"
    assert ckpt.backend["version"] == 2
