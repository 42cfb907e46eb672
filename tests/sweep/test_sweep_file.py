"""Sweep files: the command line's overrides apply after the file's own keys, seeds included."""

from __future__ import annotations

from pathlib import Path

from rollcli.sweep.file import load_sweep_file
from rollcli.sweep.plan import plan_sweep

ROOT = Path(__file__).resolve().parents[2]
PC_SPLIT = ROOT / "sweeps" / "pc-split.yaml"  # seeds: range(0,4) in the file


def _train_seeds(plan) -> set[int]:
    return {job.seed for job in plan.plan.by_type("train")}


def test_the_files_seeds_hold_without_a_command_line_override():
    assert _train_seeds(plan_sweep(load_sweep_file(PC_SPLIT))) == {0, 1, 2, 3}


def test_seeds_on_the_command_line_replace_the_files():
    sweep = load_sweep_file(PC_SPLIT, ["seeds=[0,1]"])
    assert sweep.common_overrides()[-1] == "seeds=[0,1]"
    assert _train_seeds(plan_sweep(sweep)) == {0, 1}
