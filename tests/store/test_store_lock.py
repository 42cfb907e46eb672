"""The run lock: a second orchestrator is refused with the holder's name; stale locks are taken."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time

import pytest

from rollcli.errors import LockHeldError
from rollcli.store.lock import RunLock, lock_holder

HOLD = """
import sys, time
from rollcli.store.lock import RunLock
lock = RunLock(sys.argv[1], command="rollcli run holder.yaml").acquire()
print("held", flush=True)
time.sleep(60)
"""


def test_second_lock_is_refused_naming_the_holder(tmp_path):
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(tmp_path)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout.readline().strip() == "held"
        with pytest.raises(LockHeldError) as caught:
            RunLock(tmp_path).acquire()
        message = str(caught.value)
        assert f"pid {proc.pid} on {socket.gethostname()}" in message
        assert "rollcli run holder.yaml" in message
        assert f"rollcli cancel {tmp_path}" in message
        holder = lock_holder(tmp_path)
        assert holder is not None and holder["pid"] == proc.pid
    finally:
        proc.kill()
        proc.wait()
    # the kernel dropped the dead holder's lock: it is taken over, and the takeover is noted
    lock = RunLock(tmp_path).acquire()
    try:
        assert lock.took_over is not None and lock.took_over["pid"] == proc.pid
        assert lock_holder(tmp_path)["pid"] == os.getpid()
    finally:
        lock.release()
    assert lock_holder(tmp_path) is None


def test_stale_lock_file_of_a_dead_pid_is_taken_over(tmp_path):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    info = {"pid": dead.pid, "host": socket.gethostname(), "started": "2026-01-01T00:00:00Z"}
    (tmp_path / ".lock").write_text(json.dumps(info))
    assert lock_holder(tmp_path) is None
    with RunLock(tmp_path) as lock:
        assert lock.took_over["pid"] == dead.pid
        held = json.loads((tmp_path / ".lock").read_text())
        assert held["pid"] == os.getpid() and held["started"] > "2026-01-01"


def test_release_and_reacquire(tmp_path):
    with RunLock(tmp_path), pytest.raises(LockHeldError):
        RunLock(tmp_path).acquire()
    start = time.monotonic()
    with RunLock(tmp_path):
        pass
    assert time.monotonic() - start < 1
