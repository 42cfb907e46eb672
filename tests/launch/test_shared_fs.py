"""Slurm run folders must be visible from every node: node-local paths are refused at
submission, naming the spec file and field; hub models must be cached for offline nodes."""

from __future__ import annotations

from pathlib import Path

import pytest

from rollcli.errors import SpecError
from rollcli.launch.shared_fs import filesystem_of, node_local_reason

MOUNTS = """\
22 1 8:1 / / rw - ext4 /dev/sda1 rw
30 22 0:40 / /dev/shm rw - tmpfs tmpfs rw
31 22 0:41 / /scratch rw - tmpfs tmpfs rw
40 22 0:50 / /shared rw - nfs4 server:/export rw
41 40 0:51 / /shared/lustre rw - lustre mds@o2ib:/fs rw
"""


@pytest.fixture
def mountinfo(tmp_path):
    path = tmp_path / "mountinfo"
    path.write_text(MOUNTS)
    return path


def test_filesystem_of_takes_the_deepest_mount(mountinfo):
    assert filesystem_of("/shared/lustre/runs/x", mountinfo) == ("/shared/lustre", "lustre")
    assert filesystem_of("/shared/runs", mountinfo) == ("/shared", "nfs4")
    assert filesystem_of("/home/u/runs", mountinfo) == ("/", "ext4")


@pytest.mark.parametrize("path", ["/tmp/runs", "/var/tmp/r", "/dev/shm/r", "/scratch/me/runs"])
def test_node_local_paths_are_named(path, mountinfo):
    assert "local to each node" in node_local_reason(path, mountinfo)


def test_shared_paths_pass(mountinfo):
    assert node_local_reason("/shared/lustre/runs", mountinfo) is None
    assert node_local_reason("/home/u/runs", mountinfo) is None  # cannot tell: not refused


SPEC = """\
name: where-runs-go
backend: {kind: verl, model: Org/Absent-7B}
budget: {steps: 2, rollouts_per_step: 8}
allocators: {grpo: {kind: uniform, n: 8}}
launch: {executor: slurm, time: "01:00:00"}
"""


def _spec(tmp_path: Path) -> Path:
    path = tmp_path / "cluster spec.yaml"
    path.write_text(SPEC)
    return path


def _run(spec_path: Path, run_dir: Path):
    from rollcli.launch import orchestrate
    from rollcli.plan import build_plan
    from rollcli.spec import load_spec

    spec = load_spec(spec_path)
    return orchestrate.run_experiment(
        spec, build_plan(spec), run_dir, detach=True, spec_file=str(spec_path)
    )


def test_slurm_run_folder_under_tmp_is_refused_before_anything_is_written(tmp_path, monkeypatch):
    from rollcli.launch.slurm import SlurmExecutor

    monkeypatch.delenv("ROLLCLI_ALLOW_NODE_LOCAL_RUN_DIR", raising=False)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setattr(SlurmExecutor, "preflight", lambda self: None)  # as on a login node
    run_dir = tmp_path / "runs/where-runs-go"  # pytest's tmp_path is under /tmp
    with pytest.raises(SpecError) as error:
        _run(_spec(tmp_path), run_dir)
    text = str(error.value)
    assert f"{tmp_path / 'cluster spec.yaml'}: launch.executor: slurm: the run folder" in text
    assert "under /tmp" in text and "--runs-dir" in text
    # the hub model is missing from the cache the offline jobs will read
    assert "backend.model: Org/Absent-7B not in the Hugging Face cache" in text
    assert "rollcli data prefetch" in text
    assert not run_dir.exists()


def test_users_online_choice_skips_the_cache_check(tmp_path, monkeypatch):
    from rollcli.launch.cluster_checks import submission_problems
    from rollcli.spec import load_spec

    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    spec = load_spec(_spec(tmp_path))
    assert submission_problems(spec, Path("/shared/runs/x"), "s.yaml") == []
