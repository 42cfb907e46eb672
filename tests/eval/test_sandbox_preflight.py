"""The code sandbox's preflight: each way the sandbox cannot start on a node is simulated and
must fail a code-graded verl job (train or eval) with one line, before anything else runs."""

from __future__ import annotations

from pathlib import Path

import pytest

from rollcli.eval.graders.sandbox import bwrap as bwrap_module
from rollcli.eval.graders.sandbox import cgroup as cgroup_module
from rollcli.eval.graders.sandbox.preflight import (
    SandboxPreflightError,
    needs_sandbox,
    require_sandbox,
    sandbox_checks,
)


def _proc(tmp_path: Path, *, delegated: bool = True, max_userns: str = "63000") -> Path:
    """A fake /proc: sysctls, and a cgroup v2 tree that is or is not delegated to us."""
    proc = tmp_path / "proc"
    (proc / "self").mkdir(parents=True)
    (proc / "sys/user").mkdir(parents=True)
    (proc / "sys/user/max_user_namespaces").write_text(max_userns + "\n")
    root = tmp_path / "unified"
    (root / "job").mkdir(parents=True)
    (root / "cgroup.controllers").write_text("memory pids\n")
    (root / "job/cgroup.subtree_control").write_text("memory pids\n")
    if not delegated:  # a non-root Slurm job: its group is root's, read-only to us
        (root / "job").chmod(0o555)
    (proc / "self/mountinfo").write_text(f"41 31 0:38 / {root} rw - cgroup2 cgroup2 rw\n")
    (proc / "self/cgroup").write_text("0::/job\n")
    return proc


@pytest.fixture
def working_bwrap(monkeypatch):
    monkeypatch.delenv("ROLLCLI_SANDBOX_ALLOW_WEAK", raising=False)
    monkeypatch.setattr(bwrap_module, "find_bwrap", lambda: "/usr/bin/bwrap")
    monkeypatch.setattr(bwrap_module, "check_bwrap", lambda uid: None)
    removed = []  # the fake tree's files keep rmdir failing: record the probe's clean-up instead
    monkeypatch.setattr(cgroup_module.Cgroup, "remove", lambda self: removed.append(self.dirs))
    return removed


def _failed(checks):
    return {c.name: c for c in checks if not c.ok}


def test_everything_available_passes(tmp_path, working_bwrap):
    checks = sandbox_checks(proc=_proc(tmp_path))
    assert len(working_bwrap) == 1  # the probe group was removed again
    assert [c.name for c in checks] == [
        "bubblewrap",
        "user namespaces",
        "bubblewrap sandbox",
        "cgroup",
    ]
    assert all(c.ok for c in checks), checks
    require_sandbox("backend.reward: code", checks=checks)  # no error


def test_missing_bwrap_is_named_with_the_install_command(tmp_path, working_bwrap, monkeypatch):
    monkeypatch.setattr(bwrap_module, "find_bwrap", lambda: None)
    proc = _proc(tmp_path)
    failed = _failed(sandbox_checks(proc=proc))
    assert list(failed) == ["bubblewrap"]
    with pytest.raises(SandboxPreflightError) as error:
        require_sandbox("backend.reward: code", proc=proc)
    line = str(error.value)
    assert "\n" not in line
    assert "backend.reward: code needs the code sandbox" in line
    assert "bwrap is not installed" in line and "apt-get install bubblewrap" in line


def test_user_namespaces_switched_off(tmp_path, working_bwrap, monkeypatch):
    monkeypatch.setattr(bwrap_module, "check_bwrap", lambda uid: "bwrap: No permission")
    proc = _proc(tmp_path, max_userns="0")
    failed = _failed(sandbox_checks(proc=proc))
    assert list(failed) == ["user namespaces", "bubblewrap sandbox"]
    assert "max_user_namespaces is 0" in failed["user namespaces"].detail
    with pytest.raises(SandboxPreflightError, match="user namespaces.*also failing: bubblewrap"):
        require_sandbox("eval.suite: livecodebench", proc=proc)


def test_no_delegated_cgroup(tmp_path, working_bwrap):
    proc = _proc(tmp_path, delegated=False)
    import os

    if os.geteuid() == 0:  # root writes through the mode bits: take the controllers away
        (tmp_path / "unified/cgroup.controllers").write_text("cpu\n")
    failed = _failed(sandbox_checks(proc=proc))
    assert list(failed) == ["cgroup"]
    assert failed["cgroup"].detail.startswith("no delegated cgroup")
    with pytest.raises(SandboxPreflightError, match="cgroup: no delegated cgroup.*Delegate=yes"):
        require_sandbox("backend.reward: code", proc=proc)


def test_weak_opt_in_warns_instead(tmp_path, working_bwrap, monkeypatch, caplog):
    monkeypatch.setattr(bwrap_module, "find_bwrap", lambda: None)
    monkeypatch.setenv("ROLLCLI_SANDBOX_ALLOW_WEAK", "1")
    require_sandbox("backend.reward: code", proc=_proc(tmp_path))
    assert "WEAKLY" in caplog.text


def test_which_jobs_need_the_sandbox():
    assert needs_sandbox({"backend": {"reward": "code"}}) == "backend.reward: code"
    assert needs_sandbox({"backend": {"reward": "math"}, "eval": {"suite": ["aime24"]}}) is None
    suite = {"suite": ["math500", "humaneval", "livecodebench"]}
    assert needs_sandbox({"backend": {}, "eval": suite}) == "eval.suite: humaneval, livecodebench"


def _fail_probes(monkeypatch):
    """Every code-graded job on this 'node' must stop at the preflight."""
    monkeypatch.delenv("ROLLCLI_SANDBOX_ALLOW_WEAK", raising=False)
    monkeypatch.setattr(bwrap_module, "find_bwrap", lambda: None)


def test_verl_train_job_with_code_reward_fails_before_training(tmp_path, monkeypatch):
    from rollcli.backends.verl import runner

    _fail_probes(monkeypatch)
    started = []
    monkeypatch.setattr(runner, "prepare_inputs", lambda *a, **k: started.append("prepare"))
    job = {"backend": {"kind": "verl", "model": "tiny", "device": "cpu", "reward": "code"}}
    with pytest.raises(SandboxPreflightError, match="backend.reward: code needs the code sandbox"):
        runner.run_train_job(tmp_path, job=job)
    assert started == []


def test_rollcli_eval_of_a_code_benchmark_fails_before_the_model_loads(tmp_path, monkeypatch):
    from rollcli.eval.runner import EvalSettings, evaluate

    _fail_probes(monkeypatch)
    settings = EvalSettings(suite=("humaneval",), limit=1)
    with pytest.raises(SandboxPreflightError, match="eval suite: humaneval needs the code sandbox"):
        evaluate(lambda: pytest.fail("model loaded"), settings, tmp_path, show_progress=False)


def test_verl_eval_job_with_a_code_benchmark_fails_before_loading(tmp_path, monkeypatch):
    from rollcli.backends.verl import eval_job

    _fail_probes(monkeypatch)
    config = {
        "backend": {"kind": "verl", "model": "tiny", "device": "cpu"},
        "eval": {"suite": ["humaneval"]},
        "job": {"type": "eval", "train_job": "t0"},
    }
    with pytest.raises(SandboxPreflightError, match="eval.suite: humaneval needs"):
        eval_job.run_eval_job(tmp_path / "e0", config=config)
