"""Crash and stop safety of ``rollcli run`` on the local executor.

SIGKILL at random points (sometimes the jobs too), Ctrl-C, and a concurrent second run: after a
final rerun every job's metrics equal an uninterrupted run's (except ``wall_s`` and ``time/*``),
with no row lost or duplicated.
"""

from __future__ import annotations

import contextlib
import functools
import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from rollcli.launch.local import job_process_alive
from rollcli.store.atomic import read_json, read_jsonl
from rollcli.store.layout import job_dir
from rollcli.store.lock import lock_holder
from rollcli.store.state import read_state
from rollcli.testing.specs import write_sim_spec

# long enough that a job is still running when the test interrupts it, even on an idle machine
STEPS = 300
RUN = "from rollcli.cli.app import main; main()"


def spec_maker(tmp_path: Path) -> Callable[..., Path]:
    """A function writing a small sim spec (grpo + pc, one seed) under ``tmp_path``."""
    return functools.partial(write_sim_spec, tmp_path)


def comparable(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Metrics rows without the keys allowed to differ between a resumed and a straight run."""
    return [
        {k: v for k, v in row.items() if k != "wall_s" and not k.startswith("time/")}
        for row in rows
    ]


def _start(spec: Path, runs: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-c", RUN, "run", str(spec), "--runs-dir", str(runs), "--no-summary"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )


def _finish(spec: Path, runs: Path) -> None:
    proc = _start(spec, runs)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err.decode()


def _train_ids(run_dir: Path) -> list[str]:
    return [
        j["id"]
        for j in read_json(run_dir / "manifest.json")["plan"]["jobs"]
        if j["type"] == "train"
    ]


def _metrics(run_dir: Path) -> dict[str, list[dict]]:
    return {jid: read_jsonl(job_dir(run_dir, jid) / "metrics.jsonl") for jid in _train_ids(run_dir)}


def _wait_for_rows(run_dir: Path, rows: int, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if (run_dir / "manifest.json").exists() and any(
            len(r) >= rows for r in _metrics(run_dir).values()
        ):
            return
        time.sleep(0.01)
    raise AssertionError("the run made no progress")


def _assert_same_as_reference(run_dir: Path, reference: dict[str, list[dict]]) -> None:
    got = _metrics(run_dir)
    assert got.keys() == reference.keys()
    for jid, rows in got.items():
        assert [r["step"] for r in rows] == list(range(STEPS + 1)), f"{jid}: rows lost or repeated"
        assert comparable(rows) == comparable(reference[jid]), f"{jid}: metrics differ"
        assert read_state(job_dir(run_dir, jid))["status"] == "done"


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> tuple[Path, dict[str, list[dict]]]:
    tmp = tmp_path_factory.mktemp("reference")
    spec = spec_maker(tmp)("resume", steps=STEPS)
    _finish(spec, tmp / "runs")
    return spec, _metrics(tmp / "runs" / "resume")


@pytest.mark.slow
def test_sigkill_at_random_points_then_rerun(reference, tmp_path):
    spec, expected = reference
    runs = tmp_path / "runs"
    run_dir = runs / "resume"
    rng = random.Random(20261129)
    kills = 0
    done_rows = 0
    for attempt in range(4):
        proc = _start(spec, runs)
        # kill at a random point of progress (not of time: an idle machine runs a job in ~1 s)
        if rng.random() < 0.25:
            time.sleep(rng.uniform(0.05, 0.5))  # sometimes before any job has started
        else:
            done_rows = min(STEPS - 20, done_rows + rng.randint(5, 60))
            _wait_for_rows(run_dir, done_rows)
        if proc.poll() is not None:
            break
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        kills += 1
        # a harsher crash: the jobs die mid-step too (a kill before the manifest leaves no jobs)
        if attempt % 2 and (run_dir / "manifest.json").exists():
            for jid in _train_ids(run_dir):
                folder = job_dir(run_dir, jid)
                pid = job_process_alive(read_state(folder), folder)  # only our own job process
                if pid:
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, signal.SIGKILL)
    assert kills >= 2
    _finish(spec, runs)
    _assert_same_as_reference(run_dir, expected)
    attempts = [read_state(job_dir(run_dir, jid))["attempts"] for jid in _train_ids(run_dir)]
    assert max(attempts) >= 2  # something was really interrupted and resumed


@pytest.mark.slow
def test_ctrl_c_stops_cleanly_and_a_rerun_resumes(reference, tmp_path):
    spec, expected = reference
    runs = tmp_path / "runs"
    run_dir = runs / "resume"
    proc = _start(spec, runs)
    _wait_for_rows(run_dir, 5)
    os.kill(proc.pid, signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err.decode()
    states = [read_state(job_dir(run_dir, jid)) for jid in _train_ids(run_dir)]
    assert any(s["status"] == "cancelled" for s in states), states
    for state in states:
        assert state["status"] in ("cancelled", "done", "pending")
    assert lock_holder(run_dir) is None
    _finish(spec, runs)
    _assert_same_as_reference(run_dir, expected)


@pytest.mark.slow
def test_a_second_run_is_refused_naming_the_holder(reference, tmp_path):
    spec, _ = reference
    runs = tmp_path / "runs"
    first = _start(spec, runs)
    try:
        deadline = time.monotonic() + 30
        while lock_holder(runs / "resume") is None and time.monotonic() < deadline:
            time.sleep(0.05)
        second = subprocess.run(
            [sys.executable, "-c", RUN, "run", str(spec), "--runs-dir", str(runs)],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert first.poll() is None, "the first run ended before the second started"
        assert second.returncode == 3, second.stderr
        assert f"pid {first.pid}" in second.stderr
        assert "rollcli cancel" in second.stderr
        assert len(second.stderr.strip().splitlines()) == 1
    finally:
        first.send_signal(signal.SIGINT)
        first.communicate(timeout=60)
