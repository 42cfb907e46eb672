"""Regressions from an end-to-end user review of `rollcli sweep`: a bad axis is a one-line error,
and the sweep's table never cuts or wraps a number on an 80-column terminal."""

from __future__ import annotations

import pytest
from rich.console import Console

from rollcli.analysis.ablation import Ablation, PointResult, ablation_table
from rollcli.analysis.curves import Bounded
from rollcli.sweep.axes import parse_axis


def test_unparsable_axis_is_one_line():
    with pytest.raises(ValueError) as caught:
        parse_axis("seeds", "range(0,")
    message = str(caught.value)
    assert message.startswith("axis 'seeds': cannot parse 'range(0,': ")
    assert "\n" not in message and "hydra.cc" not in message


def test_sweep_file_with_unparsable_axis_exits_2_with_one_line(cli, tmp_path):
    base = tmp_path / "base.yaml"
    base.write_text(
        "name: b\nbackend: {kind: sim}\nbudget: {steps: 2, rollouts_per_step: 64}\n"
        "allocators: {grpo: {kind: uniform, n: 8}}\n"
    )
    sweep = tmp_path / "s.yaml"
    sweep.write_text("base: ./base.yaml\ngrid:\n  budget.steps: '1,2'\nseeds: 'range(0,'\n")
    result = cli(["sweep", sweep, "--dry-run", "--runs-dir", tmp_path / "runs"])
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith(f"error: {sweep}:4:8: seeds: axis 'seeds': cannot parse")
    assert result.stderr.count("\n") == 1
    assert not (tmp_path / "runs").exists()


def test_ablation_table_keeps_numbers_whole_on_80_columns():
    results = [
        PointResult(
            index=i,
            values={"allocators.pc.p_lower": 0.25, "allocators.pc.p_upper": 0.875},
            allocator="pc",
            speedup=Bounded(0.6512, "exact"),
            ci=(0.6345, 12.3012),
            token_speedup=Bounded(0.6901, "exact"),
            final_accuracy=0.38234,
            baseline_final_accuracy=0.38211,
            reached=0.5,
            num_seeds=2,
        )
        for i in range(3)
    ]
    axes = ["allocators.pc.p_lower", "allocators.pc.p_upper"]
    ablation = Ablation("narrow", axes, axes, ["pc"], results)
    console = Console(width=80, record=True, file=None)
    with console.capture() as capture:
        console.print(ablation_table(ablation, max_width=80))
    text = capture.get()
    # the narrow layout keeps the axes, speedup, its spread, accuracy and seeds reached whole;
    # the token and wall-clock speedups are in the wide layout and the report files
    for whole in ("[0.63, 12.30]", "0.382", "0.875", "0.65", "50%"):
        assert whole in text, text
    assert "…" not in text.split("┡", 1)[1], text  # no cell of the body is cut
    assert max(len(line) for line in text.splitlines()) <= 80
    wide = Console(width=200, record=True, file=None)
    with wide.capture() as capture:
        wide.print(ablation_table(ablation, max_width=200))
    assert "token speedup" in capture.get() and "baseline acc" in capture.get()
