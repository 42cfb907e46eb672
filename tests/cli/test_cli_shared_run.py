"""``rollcli cancel`` in a run folder shared with others (issue 26): it signals only the rollcli
that holds the run's lock, whatever pid a crafted ``.lock`` names."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import time

import pytest

from rollcli.store.lock import lock_holder


@pytest.mark.skipif(shutil.which("flock") is None, reason="needs util-linux flock(1)")
def test_cancel_does_not_signal_a_pid_named_by_a_crafted_lock(cli, sim_spec, tmp_path):
    """Another user's .lock named a victim's process and held the flock: cancel killed it."""
    runs = tmp_path / "runs"
    spec = sim_spec("shared", steps=2)
    done = cli(["run", spec, "--runs-dir", runs, "--no-summary"])
    assert done.exit_code == 0, done.output
    run_dir = runs / "shared"
    victim = subprocess.Popen(["sleep", "120"])
    crafted = {"pid": victim.pid, "host": socket.gethostname(), "command": "rollcli run x"}
    (run_dir / ".lock").write_text(json.dumps(crafted) + "\n")
    holder = subprocess.Popen(["flock", "-x", str(run_dir / ".lock"), "sleep", "120"])
    try:
        deadline = time.monotonic() + 60  # ends as soon as flock holds the lock
        while lock_holder(run_dir) is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert lock_holder(run_dir)["pid"] == victim.pid  # what main trusted
        result = cli(["cancel", run_dir])
        assert result.exit_code == 0, result.output
        time.sleep(0.3)
        assert victim.poll() is None, "cancel signalled a process named by a crafted .lock"
        assert holder.poll() is None
        assert f"not signalling pid {victim.pid}" in result.output
    finally:
        for proc in (victim, holder):
            proc.kill()
            proc.wait()
