"""Resume is bit-exact: a stopped, crashed or restarted job writes the rows of an uninterrupted one."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

import pytest

from rollcli.jobs.train import run_train_job
from rollcli.store.atomic import read_jsonl
from rollcli.testing.train_jobs import ALL_KINDS, write_job


def comparable(rows: list[dict]) -> list[dict]:
    """Rows without the keys allowed to differ between a resumed and an uninterrupted run."""
    return [
        {k: v for k, v in r.items() if k != "wall_s" and not k.startswith("time/")} for r in rows
    ]


def straight_rows(tmp_path: Path, kind: str, **job: object) -> list[dict]:
    path = write_job(tmp_path / f"{kind}-straight", kind, **job)  # type: ignore[arg-type]
    run_train_job(path)
    return read_jsonl(path / "metrics.jsonl")


def stop_after(step: int) -> tuple[threading.Event, object]:
    stop = threading.Event()

    def callback(row: dict) -> None:
        if row["step"] == step:
            stop.set()

    return stop, callback


class Crash(RuntimeError):
    pass


@pytest.mark.parametrize("kind", ALL_KINDS)
@pytest.mark.parametrize("every", [1, 3])
def test_stop_and_resume_is_bit_exact(tmp_path: Path, kind: str, every: int) -> None:
    expected = straight_rows(tmp_path, kind, steps=10, every=every)
    job = write_job(tmp_path / f"{kind}-resumed", kind, steps=10, every=every)
    stop, callback = stop_after(4)
    run_train_job(job, stop=stop, callbacks=[callback])
    assert len(read_jsonl(job / "metrics.jsonl")) == 5
    run_train_job(job)
    resumed = read_jsonl(job / "metrics.jsonl")
    assert comparable(resumed) == comparable(expected)
    assert resumed[-1]["wall_s"] > 0


@pytest.mark.parametrize("kind", ALL_KINDS)
def test_crash_drops_rows_after_the_checkpoint(tmp_path: Path, kind: str) -> None:
    expected = straight_rows(tmp_path, kind, steps=9, every=3)
    job = write_job(tmp_path / f"{kind}-crashed", kind, steps=9, every=3)

    def crash_at_five(row: dict) -> None:
        if row["step"] == 5:
            raise Crash("killed")

    with pytest.raises(Crash):
        run_train_job(job, callbacks=[crash_at_five])
    # rows 4 and 5 were written after the step-3 checkpoint; a torn line follows them
    assert [r["step"] for r in read_jsonl(job / "metrics.jsonl")] == [0, 1, 2, 3, 4, 5]
    with open(job / "metrics.jsonl", "ab") as f:
        f.write(b'{"step": 6, "cum_roll')
    resumed_steps: list[int] = []
    run_train_job(job, callbacks=[lambda row: resumed_steps.append(row["step"])])
    assert resumed_steps == [4, 5, 6, 7, 8, 9]
    assert comparable(read_jsonl(job / "metrics.jsonl")) == comparable(expected)


def test_crash_before_the_first_checkpoint_starts_over(tmp_path: Path) -> None:
    expected = straight_rows(tmp_path, "uniform", steps=5, every=4)
    job = write_job(tmp_path / "early", steps=5, every=4)

    def crash_at_two(row: dict) -> None:
        if row["step"] == 2:
            raise Crash("killed")

    with pytest.raises(Crash):
        run_train_job(job, callbacks=[crash_at_two])
    run_train_job(job)
    assert comparable(read_jsonl(job / "metrics.jsonl")) == comparable(expected)


def test_resume_in_a_fresh_process_is_bit_exact(tmp_path: Path) -> None:
    kind = "pilot_commit" if "pilot_commit" in ALL_KINDS else "uniform"
    expected = straight_rows(tmp_path, kind, steps=10, every=2)
    job = write_job(tmp_path / "fresh", kind, steps=10, every=2)
    stop, callback = stop_after(4)
    run_train_job(job, stop=stop, callbacks=[callback])
    code = "import sys; from rollcli.jobs.train import run_train_job; run_train_job(sys.argv[1])"
    subprocess.run([sys.executable, "-c", code, str(job)], check=True, timeout=120)
    assert comparable(read_jsonl(job / "metrics.jsonl")) == comparable(expected)


def _crashed_job(tmp_path: Path, name: str, *, steps: int = 9, every: int = 3) -> Path:
    job = write_job(tmp_path / name, steps=steps, every=every)

    def crash_at_seven(row: dict) -> None:
        if row["step"] == 7:
            raise Crash("killed")

    with pytest.raises(Crash):
        run_train_job(job, callbacks=[crash_at_seven])
    return job


def test_torn_newest_checkpoint_falls_back_to_the_previous(tmp_path: Path, caplog) -> None:
    """A truncated newest checkpoint used to stop the job for good."""
    expected = straight_rows(tmp_path, "uniform", steps=9, every=3)
    job = _crashed_job(tmp_path, "torn")
    newest = job / "checkpoints" / "step_00000006"
    npz = newest / "backend.npz"
    npz.write_bytes(npz.read_bytes()[: npz.stat().st_size // 2])
    resumed_steps: list[int] = []
    run_train_job(job, callbacks=[lambda row: resumed_steps.append(row["step"])])
    assert resumed_steps == [4, 5, 6, 7, 8, 9]  # from step 3's checkpoint
    assert comparable(read_jsonl(job / "metrics.jsonl")) == comparable(expected)
    assert any("skipping checkpoint" in r.getMessage() and str(newest) in r.getMessage()
               for r in caplog.records)  # fmt: skip


@pytest.mark.parametrize("damage", ["deleted", "truncated", "malformed"])
def test_missing_or_damaged_metrics_restart_the_job(tmp_path: Path, damage: str, caplog) -> None:
    """A deleted metrics.jsonl of an unfinished job failed every rerun."""
    expected = straight_rows(tmp_path, "uniform", steps=9, every=3)
    job = _crashed_job(tmp_path, damage)
    metrics = job / "metrics.jsonl"
    lines = metrics.read_bytes().splitlines(keepends=True)
    if damage == "deleted":
        metrics.unlink()
    elif damage == "truncated":
        metrics.write_bytes(b"".join(lines[:2]))
    else:
        metrics.write_bytes(b"".join(lines[:2] + [b"{not json\n"] + lines[3:]))
    run_train_job(job)
    assert comparable(read_jsonl(metrics)) == comparable(expected)
    notices = [r.getMessage() for r in caplog.records if "restarting this job" in r.getMessage()]
    assert len(notices) == 1 and "metrics.jsonl" in notices[0]
    if damage == "malformed":
        assert "metrics.jsonl:3" in notices[0]


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("step", 10**15),  # the job used to build list(range(step + 1)): 21 GB, host OOM
        ("step", -3),
        ("loop.step", 10**15),
        ("loop.wall_s", "forever"),
        ("allocator.step", 10**12),
        ("allocator.pending", [[10**9, 4, "main"]]),
        ("allocator.pending", [[0, 10**12, "main"]]),
    ],
)
def test_an_edited_checkpoint_falls_back_to_the_previous(
    tmp_path: Path, field: str, value: object, caplog
) -> None:
    """Every number a resume reads is checked against the job before it is used."""
    import json
    import resource

    expected = straight_rows(tmp_path, "uniform", steps=9, every=3)
    job = _crashed_job(tmp_path, "edited")
    meta_path = job / "checkpoints" / "step_00000006" / "loop.json"
    meta = json.loads(meta_path.read_text())
    *parents, key = field.split(".")
    target = meta
    for parent in parents:
        target = target[parent]
    target[key] = value
    meta_path.write_text(json.dumps(meta))
    resumed_steps: list[int] = []
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    run_train_job(job, callbacks=[lambda row: resumed_steps.append(row["step"])])
    grown_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
    assert grown_kb < 200_000, grown_kb
    assert resumed_steps == [4, 5, 6, 7, 8, 9]  # from step 3's checkpoint
    assert comparable(read_jsonl(job / "metrics.jsonl")) == comparable(expected)
    skipped = [r.getMessage() for r in caplog.records if "skipping checkpoint" in r.getMessage()]
    assert len(skipped) == 1 and "step_00000006" in skipped[0], skipped


def test_a_backend_state_sized_for_another_pool_falls_back(tmp_path: Path, caplog) -> None:
    """A checkpoint whose backend arrays do not fit the pool used to stop the job for good."""
    import numpy as np

    from rollcli.store.datafile import load_data, save_data

    expected = straight_rows(tmp_path, "uniform", steps=9, every=3)
    job = _crashed_job(tmp_path, "resized")
    newest = job / "checkpoints" / "step_00000006"
    state = load_data(newest, "backend")
    state["prompt_offset"] = np.zeros(10**6)  # the sim pool holds 256 prompts
    save_data(newest, "backend", state)
    resumed_steps: list[int] = []
    run_train_job(job, callbacks=[lambda row: resumed_steps.append(row["step"])])
    assert resumed_steps == [4, 5, 6, 7, 8, 9]
    assert comparable(read_jsonl(job / "metrics.jsonl")) == comparable(expected)
    assert any("does not load" in r.getMessage() for r in caplog.records)


def test_when_no_checkpoint_loads_the_job_starts_clean(tmp_path: Path) -> None:
    """A half-loaded state must not leak into the fresh start that follows."""
    import numpy as np

    from rollcli.store.datafile import load_data, save_data

    expected = straight_rows(tmp_path, "uniform", steps=9, every=3)
    job = _crashed_job(tmp_path, "none-loads")
    for name in ("step_00000003", "step_00000006"):
        folder = job / "checkpoints" / name
        state = load_data(folder, "backend")
        state["theta"] = np.zeros(10**5)  # the allocator loads first, then this fails
        save_data(folder, "backend", state)
    run_train_job(job)
    assert comparable(read_jsonl(job / "metrics.jsonl")) == comparable(expected)
