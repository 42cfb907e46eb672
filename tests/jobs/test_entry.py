"""``rollcli.jobs.entry.run_job``: state transitions, stop event, failures, late signals."""

from __future__ import annotations

import threading

import yaml

from rollcli.jobs.entry import main, run_job
from rollcli.plan import build_plan
from rollcli.spec import load_spec
from rollcli.store.atomic import read_jsonl
from rollcli.store.layout import job_dir, prepare_run
from rollcli.store.state import read_state

SPEC = """\
name: entry
backend: {kind: sim, num_train_prompts: 256, num_eval_prompts: 64}
budget: {steps: 3, rollouts_per_step: 64}
allocators: {grpo: {kind: uniform, n: 8}}
tracking: {wandb: {mode: disabled}}
"""


def _train_dir(tmp_path):
    path = tmp_path / "spec.yaml"
    path.write_text(SPEC)
    spec = load_spec(path)
    plan = build_plan(spec)
    run = prepare_run(tmp_path / "run", spec.to_dict(), plan, "test")
    return job_dir(run, plan.by_type("train")[0].id)


def test_run_job_marks_done(tmp_path):
    folder = _train_dir(tmp_path)
    assert run_job(folder) == 0
    state = read_state(folder)
    assert state["status"] == "done" and state["attempts"] == 1
    assert state["executor"]["pid"] and state["finished"]
    assert [r["step"] for r in read_jsonl(folder / "metrics.jsonl")] == [0, 1, 2, 3]
    assert run_job(folder) == 0  # already done: nothing happens
    assert read_state(folder)["attempts"] == 1


def test_stop_event_cancels_and_a_rerun_resumes(tmp_path):
    folder = _train_dir(tmp_path)
    stop = threading.Event()
    stop.set()
    assert run_job(folder, stop=stop) == 0
    state = read_state(folder)
    assert state["status"] == "cancelled" and "rerun to resume" in state["error_tail"]
    assert run_job(folder) == 0
    state = read_state(folder)
    assert state["status"] == "done" and state["attempts"] == 2
    assert [r["step"] for r in read_jsonl(folder / "metrics.jsonl")] == [0, 1, 2, 3]


def test_failure_records_the_error_tail(tmp_path, capsys):
    folder = _train_dir(tmp_path)
    config = yaml.safe_load((folder / "config.yaml").read_text())
    config["backend"]["kind"] = "nope"
    (folder / "config.yaml").write_text(yaml.safe_dump(config))
    assert run_job(folder) == 1
    state = read_state(folder)
    assert state["status"] == "failed"
    assert "unknown backend kind 'nope'" in state["error_tail"]
    assert "Traceback" in capsys.readouterr().err


def test_main_usage():
    assert main([]) == 2


LATE_SIGNAL = """
import os, signal, sys
import rollcli.jobs.entry as entry
real = entry.set_status

def set_status(job_dir, status, **changes):
    if status in ("done", "cancelled"):  # a second SIGTERM right before the final record
        os.kill(os.getpid(), signal.SIGTERM)
    return real(job_dir, status, **changes)

entry.set_status = set_status
sys.exit(entry.main([sys.argv[1]]))
"""


def test_a_late_sigterm_does_not_kill_the_job_before_its_final_state(tmp_path):
    import subprocess
    import sys

    folder = _train_dir(tmp_path)
    proc = subprocess.run([sys.executable, "-c", LATE_SIGNAL, str(folder)], capture_output=True)
    assert proc.returncode == 0, proc.stderr.decode()  # not -15: the handler was still in place
    assert read_state(folder)["status"] in ("done", "cancelled")
