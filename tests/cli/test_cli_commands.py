"""Every command through the real entry point: output, exit codes, one-line errors."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from rollcli.errors import StoreError
from rollcli.store.atomic import read_json
from rollcli.store.layout import job_dir
from rollcli.store.state import read_state

REPO = Path(__file__).resolve().parents[2]


def test_validate(cli, sim_spec):
    spec = sim_spec()
    result = cli(["validate", spec])
    assert result.exit_code == 0
    assert "ok" in result.stdout and "2 allocators x 1 seeds = 2 train jobs" in result.stdout
    shown = cli(["validate", spec, "budget.steps=9", "--print"])
    assert shown.exit_code == 0
    assert yaml.safe_load(shown.stdout)["budget"]["steps"] == 9


def test_schema(cli, tmp_path):
    result = cli(["schema"])
    assert result.exit_code == 0
    assert "allocators" in json.loads(result.stdout)["properties"]
    out = tmp_path / "s.json"
    assert cli(["schema", "--output", out]).exit_code == 0
    assert json.loads(out.read_text()) == json.loads(result.stdout)


def test_init(cli, tmp_path):
    listed = cli(["init", "--list"])
    assert listed.exit_code == 0 and "quickstart" in listed.stdout.split()
    assert "base" not in listed.stdout.split()  # partial bases are not offered
    # one line per template and allocator kind, with what it is, within 80 columns (issue 16)
    lines = listed.stdout.splitlines()
    assert max(map(len, lines)) <= 80
    assert any(line.split()[:2] == ["quickstart", "GRPO"] for line in lines)
    assert any(line.split()[:2] == ["pilot_commit", "Pilot-Commit:"] for line in lines)
    assert any("paper-r1-distill-1.5b" in line for line in lines)  # presets wrap, never cut
    result = cli(["init", "my-exp", "--dir", tmp_path])
    assert result.exit_code == 0, result.output
    path = tmp_path / "my-exp.yaml"
    assert yaml.safe_load(path.read_text())["name"] == "my-exp"
    assert cli(["validate", path]).exit_code == 0
    again = cli(["init", "my-exp", "--dir", tmp_path])
    assert again.exit_code == 1 and "--force" in again.stderr
    assert cli(["init", "my-exp", "--dir", tmp_path, "--force"]).exit_code == 0
    typo = cli(["init", "x", "--template", "quickstrat", "--dir", tmp_path])
    assert typo.exit_code == 1 and "Did you mean 'quickstart'" in typo.stderr
    bad = cli(["init", "bad name", "--dir", tmp_path])
    assert bad.exit_code == 1 and "not a valid experiment name" in bad.stderr


def test_plan(cli, sim_spec):
    result = cli(["plan", sim_spec(), "seeds=[0,1,2]"])
    assert result.exit_code == 0
    assert "7 jobs (6 train, 0 eval, 1 report)" in result.stdout
    data = json.loads(cli(["plan", sim_spec(), "--json"]).stdout)
    assert data["totals"]["train"] == 2 and len(data["jobs"]) == 3


@pytest.mark.slow
def test_run_status_logs(cli, sim_spec, tmp_path):
    runs = tmp_path / "runs"
    result = cli(["run", sim_spec(), "--runs-dir", runs, "-j", "2"])
    assert result.exit_code == 0, result.output
    run_dir = runs / "tiny-sim"
    assert "rollouts to target" in result.stdout or "final accuracy" in result.stdout
    manifest = read_json(run_dir / "manifest.json")
    assert manifest["command"].startswith("rollcli ")
    status = cli(["status", run_dir])
    assert status.exit_code == 0
    assert "3 done" in status.stdout and "no `rollcli run` attached" in status.stdout
    assert "grpo/0" in status.stdout and "4/4" in status.stdout
    rows = json.loads(cli(["status", run_dir, "--json"]).stdout)["jobs"]
    assert {r["status"] for r in rows} == {"done"}
    report = cli(["logs", run_dir, "report"])
    assert report.exit_code == 0 and "wrote" in report.stdout
    assert cli(["logs", run_dir, "pc/0", "-f"]).exit_code == 0  # a finished job: returns
    missing = cli(["logs", run_dir, "pc/7"])
    assert missing.exit_code == 1
    assert (
        missing.stderr.startswith("error: no job 'pc/7'") and len(missing.stderr.splitlines()) == 1
    )
    # rerun: everything is skipped
    again = cli(["run", sim_spec(), "--runs-dir", runs, "--no-summary"])
    assert again.exit_code == 0 and "3 already done" in again.stdout


def test_errors_are_one_line_and_debug_shows_the_traceback(cli, tmp_path):
    result = cli(["status", tmp_path])
    assert result.exit_code == 1
    assert (
        result.stderr
        == f"error: {tmp_path}: not a run folder (no manifest.json); give runs/<experiment>, or start one with: rollcli run SPEC\n"
    )
    with pytest.raises(StoreError):
        cli(["status", tmp_path], env={"ROLLCLI_DEBUG": "1"})


def test_detach_needs_slurm(cli, sim_spec, tmp_path):
    result = cli(["run", sim_spec(), "--runs-dir", tmp_path / "runs", "--detach"])
    assert result.exit_code == 1 and "slurm" in result.stderr


@pytest.mark.slow
def test_cancel_one_job_then_the_run(cli, sim_spec, tmp_path):
    runs = tmp_path / "runs"
    run_dir = runs / "cancel-me"
    spec = sim_spec("cancel-me", steps=400)
    proc = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "from rollcli.cli.app import main; main()",
            "run",
            spec,
            "--runs-dir",
            runs,
            "--no-summary",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        manifest_path = run_dir / "manifest.json"
        deadline = time.monotonic() + 60
        ids: dict[str, str] = {}
        while time.monotonic() < deadline:
            if manifest_path.exists():
                jobs = read_json(manifest_path)["plan"]["jobs"]
                ids = {
                    f"{j['allocator']}/{j['seed']}": j["id"] for j in jobs if j["type"] == "train"
                }
                if all(
                    read_state(job_dir(run_dir, i))["status"] == "running" for i in ids.values()
                ):
                    break
            time.sleep(0.05)
        one = cli(["cancel", run_dir, "pc/0"])
        assert one.exit_code == 0 and ids["pc/0"] in one.stdout
        deadline = time.monotonic() + 30
        while read_state(job_dir(run_dir, ids["pc/0"]))["status"] != "cancelled":
            assert time.monotonic() < deadline, "pc/0 was not cancelled"
            time.sleep(0.05)
        assert read_state(job_dir(run_dir, ids["grpo/0"]))["status"] == "running"
        assert proc.poll() is None  # the rest of the run goes on
        everything = cli(["cancel", run_dir])
        assert everything.exit_code == 0
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 130, err.decode()
        assert read_state(job_dir(run_dir, ids["grpo/0"]))["status"] == "cancelled"
        assert "cancelled" in cli(["status", run_dir]).stdout
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
