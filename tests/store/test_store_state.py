"""Job state transitions, attempts, timestamps and concurrent updates."""

from __future__ import annotations

import multiprocessing

import pytest

from rollcli.errors import StoreError
from rollcli.store.state import init_state, read_state, set_status, update_state


def test_fresh_state_is_pending(tmp_path):
    assert read_state(tmp_path)["status"] == "pending"
    state = init_state(tmp_path)
    assert state["status"] == "pending" and state["attempts"] == 0
    assert (tmp_path / "state.json").exists()


def test_lifecycle_and_attempts(tmp_path):
    init_state(tmp_path)
    state = set_status(tmp_path, "running", executor={"kind": "local", "pid": 1})
    assert state["attempts"] == 1 and state["started"] and state["finished"] is None
    state = set_status(tmp_path, "failed", error_tail="boom")
    assert state["finished"] and state["error_tail"] == "boom"
    set_status(tmp_path, "pending")
    state = set_status(tmp_path, "running")
    assert state["attempts"] == 2 and state["error_tail"] is None
    assert set_status(tmp_path, "done")["status"] == "done"
    with pytest.raises(StoreError, match="finished"):
        set_status(tmp_path, "running")


def test_only_from_leaves_other_states_alone(tmp_path):
    init_state(tmp_path)
    set_status(tmp_path, "running")
    set_status(tmp_path, "done")
    assert set_status(tmp_path, "failed", only_from={"running"}) is None
    assert read_state(tmp_path)["status"] == "done"


def test_unknown_status(tmp_path):
    with pytest.raises(StoreError, match="unknown job status"):
        set_status(tmp_path, "exploded")


def _hammer(path, writer, n):
    for k in range(n):
        update_state(path, writer=writer, k=k)


def test_updates_from_several_processes_never_tear(tmp_path):
    init_state(tmp_path)
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=_hammer, args=(tmp_path, i, 40)) for i in range(3)]
    for proc in procs:
        proc.start()
    reads = 0
    while any(p.is_alive() for p in procs):
        state = read_state(tmp_path)  # always a whole, valid file
        assert state["status"] == "pending"
        reads += 1
    for proc in procs:
        proc.join(30)
        assert proc.exitcode == 0
    final = read_state(tmp_path)
    assert final["k"] == 39 and final["writer"] in (0, 1, 2)
    assert reads > 0
