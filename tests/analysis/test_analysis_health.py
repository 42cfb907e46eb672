"""Warnings where a comparison is void or a run misbehaved (issue 28): a drained prompt pool and
a baseline that missed its own target reach the terminal, the files and report.json."""

from __future__ import annotations

import json
from pathlib import Path

from rollcli.analysis.analyze import analyze_run
from rollcli.analysis.health import drained_pools
from rollcli.analysis.load import load_run
from rollcli.analysis.report import write_report


def drain(run: Path, job_id: str, from_step: int) -> None:
    """Rewrite a job's rows as a pool emptied at ``from_step``: nothing generated after it."""
    path = run / "jobs" / job_id / "metrics.jsonl"
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    frozen = None
    for row in rows:
        if row["step"] >= from_step:
            frozen = frozen or (
                rows[from_step - 1]["cum_rollouts"],
                rows[from_step - 1]["cum_tokens"],
            )
            row.update(step_rollouts=0, step_tokens=0, cum_rollouts=frozen[0], cum_tokens=frozen[1])
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def test_a_drained_pool_is_found_with_the_step_it_started(synthetic_run):
    """Issue 28: the quickstart's Pilot-Commit evicted its whole pool at step 143 and nothing said so."""
    assert drained_pools(load_run(synthetic_run)) == []
    drain(synthetic_run, "pc00abcdef", 33)
    found = drained_pools(load_run(synthetic_run))
    assert [(d.allocator, d.seed, d.first_step, d.empty_steps, d.last_step) for d in found] == [
        ("pc", 0, 33, 8, 40)
    ]
    analysis = analyze_run(synthetic_run)
    assert any(
        "pc/seed 0 generated nothing at 8 steps from step 33" in w for w in analysis.warnings
    )
    write_report(synthetic_run, formats="json,md", plots=False)
    data = json.loads((synthetic_run / "report" / "report.json").read_text())
    assert any("pc/seed 0" in w and "drained" in w for w in data["warnings"])
    assert "pc/seed 0 generated nothing" in (synthetic_run / "report" / "report.md").read_text()


def test_a_drained_pool_names_its_base_model_when_the_run_varies_it(synthetic_run):
    """With `base_seeds`, each seed runs on every base model: "pc/seed 0" alone named three jobs
    (seen in the tiny base-model run of 2026-12-07)."""
    import dataclasses

    from rollcli.analysis.health import find_drained_pool

    drain(synthetic_run, "pc00abcdef", 33)
    [job] = load_run(synthetic_run).jobs_of("pc")[:1]
    found = find_drained_pool(dataclasses.replace(job, base_seed=2))
    assert found is not None and found.describe().startswith(
        "pc/seed 0 on base model 2 generated nothing at 8 steps from step 33 (of 40)"
    )


def test_a_baseline_that_misses_a_fixed_target_is_said_so(make_run, tmp_path):
    run = make_run(
        tmp_path / "runs" / "high", target={"baseline": "grpo", "at": "value", "value": 0.9}
    )
    warnings = analyze_run(run).warnings
    assert any("baseline grpo never reached the target 0.9000" in w for w in warnings)
    reachable = make_run(
        tmp_path / "runs" / "ok", target={"baseline": "grpo", "at": "value", "value": 0.5}
    )
    assert not any("never reached" in w for w in analyze_run(reachable).warnings)
    # at: final reaches its own target by construction: no warning
    assert not any("never reached" in w for w in analyze_run(make_run(tmp_path / "f")).warnings)
