"""Presets run at a scale their paper never used, and trained rollouts a plan cannot promise
(issue 28: Pilot-Commit's published preset at 512 rollouts a step trains 4 prompts, the paper 128;
`plan` showed 9.6k trained rollouts for an allocator that drained its pool)."""

from __future__ import annotations

import json

from rollcli.plan.budget import allocator_budgets
from rollcli.plan.scale import matching_preset, scale_warnings
from rollcli.spec import load_spec


def _spec(tmp_path, rps: int, pc: str = "{kind: pilot_commit, preset: paper-1.5b}"):
    path = tmp_path / "s.yaml"
    path.write_text(
        "name: s\nbackend: {kind: sim, num_train_prompts: 4096}\n"
        f"budget: {{steps: 10, rollouts_per_step: {rps}}}\n"
        f"allocators:\n  grpo: {{kind: uniform, n: 8}}\n  pc: {pc}\nseeds: [0]\n"
    )
    return path


def test_a_preset_far_below_its_papers_batch_warns(tmp_path):
    small = scale_warnings(load_spec(_spec(tmp_path, 512)))
    assert small == [
        "allocators.pc: preset paper-1.5b trains 4 prompts a step at "
        "budget.rollouts_per_step=512, its paper 128; its paper's scale is "
        "budget.rollouts_per_step=16384: results at this scale are not the paper's"
    ]
    assert scale_warnings(load_spec(_spec(tmp_path, 128 * 64))) == []  # 64 prompts: a half
    # no preset (the quickstart's own small settings): nothing to compare with
    own = "{kind: pilot_commit, n_pilot: 4, n_commit: 4}"
    assert scale_warnings(load_spec(_spec(tmp_path, 64, own))) == []


def test_a_preset_with_a_changed_knob_is_not_that_preset(tmp_path):
    from rollcli.allocators.registry import PRESETS

    spec = load_spec(_spec(tmp_path, 512, "{kind: pilot_commit, preset: paper-1.5b, p_upper: 0.9}"))
    assert matching_preset(PRESETS["pilot_commit"], spec.allocators["pc"]) is None
    assert scale_warnings(spec) == []


def test_validate_and_plan_print_the_warning(cli, tmp_path):
    path = _spec(tmp_path, 512)
    validated = cli(["validate", path])
    assert validated.exit_code == 0 and "trains 4 prompts a step" in validated.stdout
    planned = cli(["plan", path, "--json"])
    assert planned.exit_code == 0, planned.output
    data = json.loads(planned.stdout)
    assert len(data["warnings"]) == 1 and "paper-1.5b" in data["warnings"][0]


def test_trained_is_a_bound_where_the_allocator_may_train_less(tmp_path, cli):
    budgets = {b.allocator: b for b in allocator_budgets(load_spec(_spec(tmp_path, 512)))}
    assert budgets["grpo"].trained_exact and not budgets["pc"].trained_exact
    assert budgets["pc"].to_json()["trained_exact"] is False
    table = cli(["plan", _spec(tmp_path, 512)]).stdout
    grpo_line = next(line for line in table.splitlines() if line.startswith("grpo "))
    pc_line = next(line for line in table.splitlines() if line.startswith("pc "))
    assert "<= 5.12k" in pc_line and "<=" not in grpo_line.split()[2]
    assert "total: <= 10.2k rollouts trained" in table
