"""The sim benchmarks' speedups print an interval only from 5 seeds a side up, as `rollcli report`
does (issue 30: intervals only from 5 seeds up everywhere, benchmarks included)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np

from rollcli.analysis.stats import SeedCurves

ROOT = Path(__file__).resolve().parents[2]


def _sim_targets():
    spec = importlib.util.spec_from_file_location(
        "sim_targets", ROOT / "benchmarks" / "sim_targets.py"
    )
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("sim_targets", module)  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def _curves(seeds: int, per_step: float) -> SeedCurves:
    steps = np.arange(11)
    return SeedCurves.build(
        {s: (steps, per_step * steps, 0.3 + 0.04 * steps + 0.01 * s) for s in range(seeds)}
    )


def test_no_interval_under_five_seeds_and_one_from_five() -> None:
    speedup = _sim_targets().speedup
    three = speedup(_curves(3, 64.0), _curves(3, 32.0), resamples=200)
    assert three.speedup == np.float64(2.0) and three.interval is None
    five = speedup(_curves(5, 64.0), _curves(5, 32.0), resamples=200)
    assert five.speedup == 2.0 and five.interval == (2.0, 2.0)


def test_two_base_models_give_no_interval_as_in_the_report() -> None:
    """Ten units over two base models: enough seeds, too few base models (report.md)."""
    steps = np.arange(11)

    def two_models(per_step: float) -> SeedCurves:
        return SeedCurves.build(
            {
                (b, s): (steps, per_step * steps, 0.3 + 0.04 * steps + 0.01 * s)
                for b in range(2)
                for s in range(5)
            }  # fmt: skip
        )

    assert (
        _sim_targets().speedup(two_models(64.0), two_models(32.0), resamples=200).interval is None
    )
