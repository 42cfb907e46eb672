"""rollcli's own checkpoint state rotates with verl's ``max_actor_ckpt_to_keep`` (whole
``global_step_N`` folders, earlier attempts' included) and the rollout rows are compressed."""

from __future__ import annotations

import zipfile
from pathlib import Path

import numpy as np
import pytest

from rollcli.backends.verl.checkpoint_rotation import prune_step_folders, step_folders
from rollcli.store.datafile import load_data, save_data


def _step(root: Path, n: int) -> Path:
    folder = root / f"global_step_{n}"
    (folder / "rollcli").mkdir(parents=True)
    (folder / "rollcli/rollout_rows.npz").write_bytes(b"rows")
    (folder / "data.pt").write_bytes(b"loader")
    return folder


def test_prune_keeps_the_newest_whole_folders(tmp_path):
    for n in (2, 4, 6, 10):  # numeric order, not name order (10 > 6)
        _step(tmp_path, n)
    (tmp_path / "global_step_x").mkdir()  # not a step folder: untouched
    (tmp_path / "latest_checkpointed_iteration.txt").write_text("10")
    removed = prune_step_folders(tmp_path, 2)
    assert [p.name for p in removed] == ["global_step_2", "global_step_4"]
    assert [n for n, _ in step_folders(tmp_path)] == [6, 10]
    assert (tmp_path / "global_step_x").is_dir()


def test_prune_never_removes_the_tracked_latest_and_keeps_all_without_a_limit(tmp_path):
    for n in (1, 2, 3):
        _step(tmp_path, n)
    (tmp_path / "latest_checkpointed_iteration.txt").write_text("1")  # e.g. a save in flight
    assert prune_step_folders(tmp_path, None) == []
    prune_step_folders(tmp_path, 1)
    assert [n for n, _ in step_folders(tmp_path)] == [1, 3]


def test_compressed_rows_round_trip_and_shrink(tmp_path):
    ids = np.zeros((64, 2048), dtype=np.int64)  # padded responses: mostly pad tokens
    ids[:, :100] = np.arange(100)
    state = {"batch": {"responses": ids}, "meta": [1, "a"]}
    save_data(tmp_path / "plain", "rows", state)
    save_data(tmp_path / "small", "rows", state, compressed=True)
    plain = (tmp_path / "plain/rows.npz").stat().st_size
    small = (tmp_path / "small/rows.npz").stat().st_size
    assert small * 20 < plain
    with zipfile.ZipFile(tmp_path / "small/rows.npz") as archive:
        assert {i.compress_type for i in archive.infolist()} == {zipfile.ZIP_DEFLATED}
    back = load_data(tmp_path / "small", "rows")
    assert np.array_equal(back["batch"]["responses"], ids) and back["meta"] == [1, "a"]


class _Allocator:
    def state_dict(self):
        return {"replay": [1, 2]}


def test_trainer_save_rotates_rollcli_state_with_verl(tmp_path, monkeypatch):
    """The trainer's save, with verl's own save replaced by what it writes (actor/, data.pt,
    the tracker); a requeued attempt's older folders are rotated too."""
    pytest.importorskip("verl")
    from omegaconf import OmegaConf
    from verl.trainer.ppo.ray_trainer import RayPPOTrainer

    from rollcli.backends.verl.rollouts import RolloutStore
    from rollcli.backends.verl.trainer import RollcliPPOTrainer

    root = tmp_path / "checkpoints"

    def verl_save(self):
        folder = root / f"global_step_{self.global_steps}"
        (folder / "actor").mkdir(parents=True)
        (folder / "data.pt").write_bytes(b"loader")
        (root / "latest_checkpointed_iteration.txt").write_text(str(self.global_steps))

    monkeypatch.setattr(RayPPOTrainer, "_save_checkpoint", verl_save)
    trainer = RollcliPPOTrainer.__new__(RollcliPPOTrainer)
    trainer.config = OmegaConf.create(
        {"trainer": {"default_local_dir": str(root), "max_actor_ckpt_to_keep": 2}}
    )
    trainer.store, trainer.allocator, trainer.loop = RolloutStore(), _Allocator(), None
    trainer.policy_version = 0
    _step(root, 1)  # left by an earlier attempt of this job
    for step in (2, 3, 4):
        trainer.global_steps = step
        trainer._save_checkpoint()
    assert [n for n, _ in step_folders(root)] == [3, 4]
    assert (root / "global_step_4/rollcli/state.json").is_file()
