"""Run folders shared with other users (issue 26): planted links and crafted lock files.

A ``.lock``, ``.state.lock`` or ``metrics.jsonl`` planted as a symbolic link must not make
rollcli write or truncate its target, and ``rollcli cancel`` must signal only the rollcli that
holds the run's lock, whatever pid a crafted ``.lock`` names.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from rollcli.errors import StoreError
from rollcli.store.atomic import append_jsonl
from rollcli.store.lock import RunLock, holder_process, lock_holder
from rollcli.store.state import set_status


@pytest.fixture()
def victim(tmp_path):
    path = tmp_path / "victim.txt"
    path.write_text("precious\nlast line without newline")
    return path


def test_a_planted_lock_symlink_is_refused_and_its_target_kept(tmp_path, victim):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / ".lock").symlink_to(victim)
    with pytest.raises(StoreError, match="symbolic link"):
        RunLock(run_dir).acquire()
    assert lock_holder(run_dir) is None
    assert victim.read_text() == "precious\nlast line without newline"


def test_planted_state_lock_and_metrics_symlinks_are_refused(tmp_path, victim):
    job_dir = tmp_path / "job"
    job_dir.mkdir()
    (job_dir / ".state.lock").symlink_to(victim)
    with pytest.raises(StoreError, match="symbolic link"):
        set_status(job_dir, "running")
    (job_dir / "metrics.jsonl").symlink_to(victim)  # append cuts a torn last line
    with pytest.raises(StoreError, match="symbolic link"):
        append_jsonl(job_dir / "metrics.jsonl", [{"step": 0}])
    fifo = job_dir / "fifo.jsonl"
    os.mkfifo(fifo)
    with pytest.raises(StoreError, match="not a regular file"):
        append_jsonl(fifo, [{"step": 0}])
    assert victim.read_text() == "precious\nlast line without newline"


HOLD = """
import sys, time
from rollcli.store.lock import RunLock
lock = RunLock(sys.argv[1], command="rollcli run holder.yaml").acquire()
print("held", flush=True)
time.sleep(60)
"""


def test_only_the_real_holder_is_named(tmp_path):
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(tmp_path)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout.readline().strip() == "held"
        assert holder_process(tmp_path) == proc.pid
        held = json.loads((tmp_path / ".lock").read_text())
        assert isinstance(held["start_ticks"], int)
    finally:
        proc.kill()
        proc.wait()
