"""``status`` and ``report`` on a damaged run folder: a torn manifest, lines that are not JSON,
non-numeric metric values. Each gives one warning line naming the file and line, never a
traceback, and the commands still answer from what can be trusted."""

from __future__ import annotations

from pathlib import Path

import pytest

SPEC = """name: damaged
backend: {kind: sim, num_train_prompts: 256, num_eval_prompts: 64}
budget: {steps: 3, rollouts_per_step: 128}
allocators:
  grpo: {kind: uniform, n: 8}
  big: {kind: uniform, n: 16}
seeds: [0]
eval: {every: 1}
target: {baseline: grpo, metric: accuracy, at: final}
launch: {executor: local}
tracking: {wandb: {mode: disabled}}
"""


@pytest.fixture()
def run_dir(tmp_path: Path, cli) -> Path:
    spec = tmp_path / "spec.yaml"
    spec.write_text(SPEC)
    result = cli(["run", spec, "--runs-dir", tmp_path / "runs"])
    assert result.exit_code == 0, result.output
    return tmp_path / "runs" / "damaged"


def _warnings(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("warning: ")]


def test_torn_manifest_is_rebuilt_with_one_warning(run_dir: Path, cli) -> None:
    manifest = run_dir / "manifest.json"
    text = manifest.read_text()
    manifest.write_text(text[: len(text) // 2])
    for command in (["status", run_dir], ["report", run_dir]):
        result = cli(command)
        assert result.exit_code == 0, (command, result.output)
        assert "Traceback" not in result.output
        warnings = _warnings(result.stderr)
        assert len(warnings) == 1 and f"{manifest}:" in warnings[0], result.stderr
        assert "rebuilt" in warnings[0]
    status = cli(["status", run_dir, "--json"])
    assert status.exit_code == 0 and status.stdout.count('"done"') >= 2


def test_malformed_rows_and_values_are_skipped_with_warnings(run_dir: Path, cli) -> None:
    from rollcli.analysis import load_run

    job = next(j for j in load_run(run_dir).jobs if j.allocator == "grpo")
    metrics = run_dir / "jobs" / job.job_id / "metrics.jsonl"
    lines = metrics.read_text().splitlines(keepends=True)
    bad_value = lines[2].replace('"eval/accuracy": ', '"eval/accuracy": "abc", "x": ', 1)
    metrics.write_text("".join([lines[0], "{not json\n", lines[1], bad_value, *lines[3:]]))
    for command in (["status", run_dir], ["report", run_dir]):
        result = cli(command)
        assert result.exit_code == 0, (command, result.output)
        assert "Traceback" not in result.output
    report = cli(["report", run_dir])
    warnings = _warnings(report.stderr)
    assert any(f"{metrics}:2:" in w for w in warnings), report.stderr
    assert any("eval/accuracy is 'abc'" in w for w in warnings), report.stderr


def test_absurd_numbers_in_a_row_are_skipped_not_a_crash(run_dir: Path, cli) -> None:
    """A step of 10**400 crashed report with OverflowError (issue 26)."""
    import json

    from rollcli.analysis import load_run

    job = next(j for j in load_run(run_dir).jobs if j.allocator == "grpo")
    metrics = run_dir / "jobs" / job.job_id / "metrics.jsonl"
    rows = [json.loads(line) for line in metrics.read_text().splitlines()]
    rows[-1]["step"] = 10**400
    rows[1]["cum_rollouts"] = -(10**400)
    rows.append({**rows[1], "step": 10**12})
    metrics.write_text("".join(json.dumps(row) + "\n" for row in rows))
    for command in (["status", run_dir], ["report", run_dir]):
        result = cli(command)
        assert result.exit_code == 0, (command, result.output)
        assert "Traceback" not in result.output
    warnings = _warnings(cli(["report", run_dir]).stderr)
    assert any("row 4: step is 1000000000" in w or "step is 10000000" in w for w in warnings)
    assert any("cum_rollouts" in w for w in warnings), warnings


def test_a_full_disk_names_the_file_that_could_not_be_written(run_dir: Path, cli, monkeypatch):
    """``report`` after ENOSPC said only 'No space left on device' (issue 26)."""
    import errno
    import os

    def full(fd: int) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "fsync", full)
    result = cli(["report", run_dir])
    assert result.exit_code == 1, result.output
    (line,) = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
    assert f"error: {run_dir}" in line and "No space left on device" in line, line
