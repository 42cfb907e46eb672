"""Progress a person reads (issue 16): a train job's log lines (`rollcli logs` printed nothing
for a training job), the live view's note while a job has no step yet (the tiny base-model build
showed only `running -`), and plain lines with an overall ETA when the output is no terminal."""

from __future__ import annotations

import io
import json
from pathlib import Path

from rollcli.jobs.steplog import StepLog, step_line

SIM_QUICKSTART = (
    Path(__file__).resolve().parents[2] / "rollcli" / "templates" / "specs" / "quickstart.yaml"
)


def test_step_lines():
    assert step_line({"step": 0, "eval/accuracy": 0.654, "eval/greedy": 0.99}, 150) == (
        "step 0/150  before training  eval/accuracy 0.654"
    )
    row = {
        "step": 3,
        "step_rollouts": 160,
        "cum_rollouts": 41600,
        "rollouts_trained": 64,
        "reward_mean": 0.7712,
        "time/step_s": 3.434,
    }
    assert step_line(row, 150, eta_s=75) == (
        "step 3/150  generated 160 (41.6k in all)  trained 64  reward 0.77  3.43 s  eta 1m15s"
    )
    clock = iter([0.0, 10.0, 20.0])
    out = io.StringIO()
    log = StepLog(4, stream=out, clock=lambda: next(clock))
    for step in (0, 1, 2):
        log({"step": step})
    assert out.getvalue().splitlines() == [
        "step 0/4  before training",
        "step 1/4  eta 30s",  # 10 s a step, 3 to go
        "step 2/4  eta 20s",
    ]


def test_logs_of_a_training_job_and_plain_progress_lines(cli, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    overrides = ["budget.steps=4", "seeds=[0]", "eval.every=2"]
    ran = cli(["run", SIM_QUICKSTART, *overrides, "--runs-dir", tmp_path])
    assert ran.exit_code == 0, ran.output
    # not a terminal: one plain line per job that starts or ends, each with the overall line
    lines = [ln for ln in ran.stdout.splitlines() if "(overall: " in ln]
    assert any(" grpo/0 done  (overall: " in ln for ln in lines), ran.stdout
    assert "report done  (overall: 5/5 jobs done; steps 16/16 (100%)" in lines[-1], lines
    run_dir = tmp_path / "quickstart"
    logs = cli(["logs", run_dir, "pc/0"])
    assert logs.exit_code == 0, logs.output
    steps = [ln for ln in logs.stdout.splitlines() if ln.startswith("step ")]
    assert [ln.split()[1] for ln in steps] == ["0/4", "1/4", "2/4", "3/4", "4/4"]
    assert "generated" in steps[1] and "eval/accuracy" in steps[2] and "eval/" not in steps[1]
    followed = cli(["logs", run_dir, "pc/0", "-f"])  # a finished job: prints and returns
    assert followed.exit_code == 0 and followed.stdout == logs.stdout


def test_running_job_without_a_step_shows_its_last_log_line(tmp_path):
    """What the live view and `status` print while the tiny backend builds its base model."""
    from rollcli.cli._jobs import JobRows, overall_line
    from rollcli.store.folders import RunFolder

    job = {"id": "abc123def0", "type": "train", "allocator": "grpo", "seed": 0, "depends_on": []}
    manifest = {"plan": {"jobs": [job]}, "spec": {"budget": {"steps": 10}}}
    folder = RunFolder(tmp_path).job(job["id"])
    folder.logs.mkdir(parents=True)
    (folder.path / "state.json").write_text(json.dumps({"status": "running", "attempts": 1}))
    folder.stderr_log.write_text(
        "building the tiny base model (once per recipe, ~30 s on 2 cores)\n"
        "building tiny base model  10/300\rbuilding tiny base model  90/300 steps\n"
    )
    rows = JobRows(manifest, tmp_path)
    (row,) = rows.rows({job["id"]: "running"})
    assert row["note"] == "building tiny base model  90/300 steps"
    assert overall_line(rows, {job["id"]: "running"}, None) == (
        "overall: 0/1 jobs done, 1 running; steps 0/10 (0%)"
    )


def test_live_view_draws_a_progress_bar_with_an_eta(tmp_path):
    """The terminal view: the job table over rich.progress's bar of the train steps; the ETA is
    rich's estimate from the steps seen (and the plain lines carry the same number)."""
    from rich.console import Console

    from rollcli.cli._jobs import LiveView
    from rollcli.store.folders import RunFolder

    jobs = [
        {"id": f"job{i}", "type": "train", "allocator": "grpo", "seed": i, "depends_on": []}
        for i in range(2)
    ]
    manifest = {"plan": {"jobs": jobs}, "spec": {"budget": {"steps": 10}}}
    metrics = []
    for job in jobs:
        folder = RunFolder(tmp_path).job(job["id"])
        folder.logs.mkdir(parents=True)
        (folder.path / "state.json").write_text(json.dumps({"status": "running", "attempts": 1}))
        metrics.append(folder.metrics)
    now = [0.0]
    screen = io.StringIO()
    console = Console(file=screen, force_terminal=True, width=120, color_system=None)
    running = {job["id"]: "running" for job in jobs}
    with LiveView(manifest, tmp_path, console, clock=lambda: now[0]) as view:
        view.update(running)  # no step yet: no estimate
        assert view.progress.tasks[0].time_remaining is None
        for second, rows in ((10.0, 2), (20.0, 4)):  # each job at step 1, then at step 3
            now[0] = second
            for path in metrics:
                path.write_text(
                    "".join(json.dumps({"step": s, "cum_rollouts": s}) + "\n" for s in range(rows))
                )
            view.update(running)
    # 6 of 20 steps done; 4 steps in the 10 s since the first sample: 14 to go at 0.4/s
    assert view.progress.tasks[0].completed == 6
    assert view.progress.tasks[0].time_remaining == 35
    drawn = screen.getvalue()
    assert "overall: 0/2 jobs done, 2 running" in drawn and "steps 6/20" in drawn
    assert "30%" in drawn and "0:35" in drawn
