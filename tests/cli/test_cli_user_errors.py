"""Regressions from an end-to-end user review of the CLI: unwritable output paths are one-line
errors (no traceback), resume hints name the runs folder, and `rollcli report` points at its own
files for the columns a narrow terminal leaves out."""

from __future__ import annotations

import pytest

from rollcli.launch.orchestrate import RunResult


def _one_line_error(result, start: str) -> None:
    assert result.exit_code == 1, result.output
    assert result.stderr.startswith(f"error: {start}"), result.stderr
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.output


def test_report_out_is_an_existing_file(cli, tmp_path):
    target = tmp_path / "my report"
    target.write_text("keep me")
    for out in (target, target / "sub"):
        result = cli(["report", tmp_path / "runs" / "x", "--out", out, "--no-plots"])
        _one_line_error(result, f"{out}: cannot write the report there: {target} is a file")
    assert target.read_text() == "keep me"


def test_schema_output_is_a_folder(cli, tmp_path):
    result = cli(["schema", "--output", tmp_path])
    _one_line_error(result, f"{tmp_path} is a folder; give a file name")


def test_init_dir_is_a_file(cli, tmp_path):
    blocker = tmp_path / "experiments"
    blocker.write_text("")
    _one_line_error(cli(["init", "x", "--dir", blocker]), f"--dir {blocker} is a file")


def test_os_errors_are_one_line_unless_debugging(cli, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    result = cli(["schema", "--output", blocker / "schema.json"])
    _one_line_error(result, f"{blocker}: File exists")
    with pytest.raises(FileExistsError):
        cli(["schema", "--output", blocker / "schema.json"], env={"ROLLCLI_DEBUG": "1"})


@pytest.mark.parametrize("runs", [None, "my runs"])
def test_resume_hint_keeps_the_runs_folder(cli, sim_spec, tmp_path, monkeypatch, runs):
    def interrupted(spec, plan, run_dir, **kwargs):
        return RunResult(run_dir, interrupted=True)

    monkeypatch.setattr("rollcli.launch.orchestrate.run_experiment", interrupted)
    monkeypatch.chdir(tmp_path)
    spec = sim_spec()
    extra = [] if runs is None else ["--runs-dir", runs]
    result = cli(["run", spec, "budget.steps=3", *extra, "--no-summary"])
    assert result.exit_code == 130, result.output
    hint = " ".join(result.stdout.split())  # rich may wrap the line
    expected = f"Resume with: rollcli run {spec} budget.steps=3"
    expected += " --runs-dir 'my runs'" if runs else ""
    assert hint.endswith(expected), hint


def test_report_hint_names_its_own_file(cli, sim_spec, tmp_path):
    runs = tmp_path / "runs"
    assert cli(["run", sim_spec(steps=2), "--runs-dir", runs, "--no-summary"]).exit_code == 0
    out = tmp_path / "out dir"
    args = ["report", runs / "tiny-sim", "-f", "csv", "--out", out, "--no-plots"]
    result = cli(args, env={"COLUMNS": "80"})  # narrow: the compact table and the hint
    assert result.exit_code == 0, result.output
    flat = " ".join(result.stdout.split())
    assert f"variance columns: {out / 'report.csv'} (or a wider terminal)" in flat, flat
    assert "`rollcli report" not in flat
    assert (out / "report.csv").is_file()


def test_logs_follow_of_a_job_nothing_will_start_returns(cli, sim_spec, tmp_path):
    import subprocess
    import sys

    from rollcli.store.atomic import read_json
    from rollcli.store.layout import job_dir
    from rollcli.store.state import update_state

    runs = tmp_path / "runs"
    assert cli(["run", sim_spec(steps=2), "--runs-dir", runs, "--no-summary"]).exit_code == 0
    run_dir = runs / "tiny-sim"
    jobs = read_json(run_dir / "manifest.json")["plan"]["jobs"]
    pc0 = next(j["id"] for j in jobs if j["allocator"] == "pc" and j["seed"] == 0)
    update_state(job_dir(run_dir, pc0), status="pending")  # e.g. the run was killed before it
    follow = [sys.executable, "-m", "rollcli.cli", "logs", str(run_dir), "pc/0", "-f"]
    done = subprocess.run(follow, capture_output=True, text=True, timeout=20)
    assert done.returncode == 0, done.stderr
    assert "pc/0 is pending and no `rollcli run` is attached" in done.stderr


def test_report_on_a_sweep_folder_points_at_the_ablation_report(cli, tmp_path):
    run_dir = tmp_path / "runs" / "pc-thresholds"
    run_dir.mkdir(parents=True)
    (run_dir / "sweep.json").write_text('{"points": []}')
    result = cli(["report", run_dir, "--no-plots"])
    _one_line_error(result, f"{run_dir} is a sweep run folder")
    assert str(run_dir / "report" / "ablation.md") in result.stderr
    assert not (run_dir / "report").exists()
