"""Every hint the CLI prints is a command that runs (issue 16: hints that led nowhere).

One table of situations: the command that produces a hint, how to read the hint out of its
error, and the test runs what the hint says. The issue's three dead ends: ``run key=a,b`` said to
use ``rollcli sweep``, which then failed on the spec (``extends: unknown key``); inside ``sweep``
the hint pointed back to ``sweep``; the ``+key`` hint for a typo'd knob failed as well.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
QUICKSTART = "experiments/quickstart.yaml"
VERL = "tests/golden/plan/verl.yaml"


def _quoted_override(stderr: str) -> list[str]:
    """``... did you mean 'key=value'?`` or ``add it with '+key=value'`` -> that override."""
    found = re.findall(r"(?:did you mean|add (?:it|the key) with) '([^']+=[^']*)'", stderr)
    assert found, stderr
    return [found[-1]]


def _command_after_colon(stderr: str) -> list[str]:
    """``...: rollcli sweep SPEC ... --dry-run`` (the last ``rollcli`` command of the line)."""
    at = stderr.rindex("rollcli ")
    text = stderr[at:].splitlines()[0].split(" (or ")[0]
    return shlex.split(text)[1:]


# (id, the command that fails with a hint, how to turn the hint into a command)
SITUATIONS = [
    # a typo'd knob of an allocator: the corrected override, never '+' (knobs are fixed)
    (
        "allocator-knob-typo",
        ["validate", QUICKSTART, "allocators.pc.n_comit=12"],
        lambda err, args: [*args[:2], *_quoted_override(err)],
    ),
    ("section-key-typo", ["validate", QUICKSTART, "budget.step=4"], None),
    ("backend-knob-typo", ["validate", QUICKSTART, "backend.num_train_prompt=1024"], None),
    # a free-form mapping: '+' adds the key
    ("free-mapping-add", ["validate", VERL, "eval.samples.aime24=4"], None),
    ("new-allocator", ["validate", VERL, "allocators.extra.kind=uniform"], None),
    # several values where one spec is built: the sweep that runs them
    (
        "run-a-sweep",
        ["run", QUICKSTART, "allocators.pc.n_commit=12,28"],
        lambda err, args: _command_after_colon(err),
    ),
    (
        "plan-a-sweep",
        ["plan", QUICKSTART, "budget.steps=20,40"],
        lambda err, args: _command_after_colon(err),
    ),
    # a spec given to `sweep` with nothing to sweep
    ("sweep-a-spec", ["sweep", QUICKSTART], lambda err, args: _command_after_colon(err)),
    # `init` without a name: the listing it points to
    ("init-no-name", ["init"], lambda err, args: ["init", "--list"]),
]


def _default(err: str, args: list[str]) -> list[str]:
    return [*args[:2], *_quoted_override(err)]


@pytest.mark.parametrize(("name", "args", "follow"), SITUATIONS, ids=[s[0] for s in SITUATIONS])
def test_every_hint_runs(cli, monkeypatch, name, args, follow):
    monkeypatch.chdir(ROOT)
    failed = cli(args)
    assert failed.exit_code != 0, failed.output
    hinted = (follow or _default)(failed.stderr, args)
    assert hinted != args, failed.stderr
    result = cli(hinted)
    assert result.exit_code == 0, f"{name}: the hint {hinted} failed:\n{result.output}"


def test_a_sweep_file_takes_extra_axes_on_the_command_line(cli, monkeypatch):
    """Inside `sweep`, `key=a,b` pointed back to `sweep`: it is now one more grid axis."""
    monkeypatch.chdir(ROOT)
    result = cli(["sweep", "sweeps/pc-thresholds.yaml", "budget.steps=5,10", "--dry-run"])
    assert result.exit_code == 0, result.output
    assert "32 points" in result.stdout  # 4 x 4 thresholds x 2 step counts
    twice = cli(["sweep", "sweeps/pc-thresholds.yaml", "allocators.pc.p_lower=0,0.5", "--dry-run"])
    assert twice.exit_code == 2 and "is an axis of the file already" in twice.stderr


def test_sweeping_a_spec_names_its_folder_after_the_knobs(cli, monkeypatch):
    monkeypatch.chdir(ROOT)
    result = cli(["sweep", QUICKSTART, "allocators.pc.n_commit=12,28", "--dry-run"])
    assert result.exit_code == 0, result.output
    assert "2 points -> 10 jobs to run" in result.stdout  # grpo, dapo, vigor shared by both
    assert "runs/quickstart-n_commit" in result.stdout
