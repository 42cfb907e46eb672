"""The base model as a random factor: the two-level bootstrap (base models, then seeds within each)
against a hand-computed one, its draw structure, and a report of a B x S run."""

from __future__ import annotations

import json
import math
from pathlib import Path
from statistics import NormalDist

import numpy as np
import pytest

from rollcli.analysis.analyze import analyze_run
from rollcli.analysis.report import render_json, render_markdown
from rollcli.analysis.stats import (
    SeedCurves,
    bootstrap_speedups,
    is_balanced,
    resample_indices,
    t_quantile,
)
from rollcli.analysis.summary import footnotes, per_seed_rows

from .conftest import write_synthetic_run

STEPS = np.array([0, 1, 2, 3])
X = np.array([0.0, 100.0, 200.0, 300.0])
# (base model, seed) -> accuracy at each evaluation; base model 1 starts better than base model 0
BASE = {
    (0, 0): [0.20, 0.40, 0.55, 0.60],
    (0, 1): [0.20, 0.35, 0.50, 0.62],
    (1, 0): [0.30, 0.50, 0.65, 0.70],
    (1, 1): [0.30, 0.45, 0.60, 0.66],
}
ALLOC = {
    (0, 0): [0.20, 0.50, 0.60, 0.64],
    (0, 1): [0.20, 0.42, 0.58, 0.61],
    (1, 0): [0.30, 0.62, 0.70, 0.72],
    (1, 1): [0.30, 0.55, 0.66, 0.70],
}


def _curves(values: dict) -> SeedCurves:
    return SeedCurves.build({u: (STEPS, X, np.array(y)) for u, y in values.items()})


def _crossing(y: list[float], target: float) -> float:
    """First crossing of a piecewise-linear curve over X (the last x when never reached)."""
    for k, value in enumerate(y):
        if value >= target - 1e-9:
            if k == 0:
                return X[0]
            frac = (target - y[k - 1]) / (value - y[k - 1])
            return X[k - 1] + min(max(frac, 0.0), 1.0) * (X[k] - X[k - 1])
    return X[-1]


def test_two_level_bootstrap_matches_a_hand_computed_one() -> None:
    num_resamples, seed = 400, 3
    interval = bootstrap_speedups(
        {"rollouts": _curves(BASE)},
        {"rollouts": _curves(ALLOC)},
        lambda idx: _curves(BASE).finals[idx].mean(axis=1),  # at: final
        confidence=0.6,  # tails inside the distribution (at 0.95 and n = 4: its min and max)
        num_resamples=num_resamples,
        seed=seed,
    )["rollouts"]

    # by hand: draw 2 base models with replacement; for every drawn slot, 2 seeds of that base
    # model with replacement; baseline and allocator take the same units (paired)
    rng = np.random.default_rng(seed)
    models = rng.integers(0, 2, size=(num_resamples, 2))
    within = [[rng.integers(0, 2, size=(num_resamples, 2)) for _ in range(2)] for _ in range(2)]
    speedups = []
    for r in range(num_resamples):
        units = [
            (int(models[r, slot]), int(s))
            for slot in range(2)
            for s in within[slot][models[r, slot]][r]
        ]
        base_mean = np.mean([BASE[u] for u in units], axis=0)
        alloc_mean = np.mean([ALLOC[u] for u in units], axis=0)
        target = float(np.mean([BASE[u][-1] for u in units]))
        speedups.append(_crossing(list(base_mean), target) / _crossing(list(alloc_mean), target))
    # the expanded percentile interval over 4 units (n = 4: t with 3 degrees of freedom)
    tail = NormalDist().cdf(-math.sqrt(4 / 3) * t_quantile(0.8, 3))
    expected = np.quantile(np.array(speedups), [tail, 1 - tail])
    assert interval == pytest.approx(tuple(expected), rel=1e-12)
    assert interval[0] < interval[1]


def test_draws_keep_a_slot_within_one_base_model_and_pair_the_sides() -> None:
    units = [(0, 0), (0, 1), (1, 0), (1, 1)]
    idx_b, idx_a = resample_indices(units, units, 20000, np.random.default_rng(0))
    drawn = np.array(units)[idx_b]  # (R, 4, 2)
    assert (idx_b == idx_a).all()
    # each slot of two seeds comes from one base model
    assert (drawn[:, 0, 0] == drawn[:, 1, 0]).all() and (drawn[:, 2, 0] == drawn[:, 3, 0]).all()
    # both slots on the same base model: probability 1/2 (a flat bootstrap of the four units
    # puts all four on one base model with probability 1/8)
    same = np.mean(drawn[:, 0, 0] == drawn[:, 2, 0])
    assert same == pytest.approx(0.5, abs=0.02)
    # every unit equally likely overall
    counts = np.bincount(idx_b.ravel(), minlength=4) / idx_b.size
    assert counts == pytest.approx([0.25] * 4, abs=0.01)


def test_unbalanced_base_models_give_no_interval() -> None:
    uneven = {u: y for u, y in BASE.items() if u != (1, 1)}
    assert not is_balanced(list(uneven)) and is_balanced(list(BASE)) and is_balanced([0, 1, 5])
    with pytest.raises(ValueError, match="as many seeds"):
        resample_indices(list(uneven), list(uneven), 10, np.random.default_rng(0))
    out = bootstrap_speedups(
        {"rollouts": _curves(uneven)},
        {"rollouts": _curves(uneven)},
        lambda idx: np.full(idx.shape[0], 0.5),
    )
    assert out == {"rollouts": None}


def _write_b_by_s_run(root: Path, base_seeds: tuple[int, ...], seeds: tuple[int, ...]) -> Path:
    """The synthetic run of tests/analysis/conftest.py repeated on several base models: base
    model b shifts every accuracy by 0.02 b, and jobs carry their base_seed as the plan writes."""
    run = root / "runs" / "two-level"
    manifests = []
    for b in base_seeds:
        from .conftest import ALLOCATORS

        shifted = {
            name: (kind, per_step, tok, step_s, lambda k, s, acc=acc, b=b: acc(k, s) + 0.02 * b)
            for name, (kind, per_step, tok, step_s, acc) in ALLOCATORS.items()
            if name in ("grpo", "pc")
        }
        part = write_synthetic_run(
            root / f"part{b}", allocators=shifted, seeds=seeds, tag=f"b{b}", experiment="two-level"
        )
        manifest = json.loads((part / "manifest.json").read_text())
        for job in manifest["plan"]["jobs"]:
            if job["type"] == "train":
                job["base_seed"] = b
                (run / "jobs").mkdir(parents=True, exist_ok=True)
                (part / "jobs" / job["id"]).rename(run / "jobs" / job["id"])
        manifests.append(manifest)
    plan = [j for m in manifests for j in m["plan"]["jobs"] if j["type"] == "train"]
    manifest = {**manifests[0], "plan": {"jobs": plan}}
    manifest["spec"]["base_seeds"] = list(base_seeds)
    (run / "manifest.json").write_text(json.dumps(manifest))
    return run


def test_a_b_by_s_run_reports_two_level_intervals_and_per_base_model_rows(tmp_path: Path) -> None:
    run = _write_b_by_s_run(tmp_path, (0, 1, 2), (0, 1))
    analysis = analyze_run(run, num_resamples=300)
    assert analysis.base_models == [0, 1, 2]
    pc = analysis.get("pc")
    assert pc.seeds == [(b, s) for b in (0, 1, 2) for s in (0, 1)]
    assert pc.axes["rollouts"].ci is not None  # 6 units, 3 base models: an interval
    assert any("two-level bootstrap" in line for line in footnotes(analysis))
    report = render_json(analysis)
    assert report["base_models"] == [0, 1, 2]
    assert "base models, then the seeds" in report["interval_method"]
    assert set(report["allocators"]["pc"]["rollouts_to_target"]["per_seed"]) == {
        f"b{b}/s{s}" for b in (0, 1, 2) for s in (0, 1)
    }
    per_model = report["allocators"]["grpo"]["rollouts_to_target"]["per_base_model"]
    assert set(per_model) == {"0", "1", "2"} and per_model["2"]["kind"] == "exact"
    rows = per_seed_rows(analysis)
    assert [(r["allocator"], r["base model"]) for r in rows] == [
        (a, str(b)) for a in ("grpo", "pc") for b in (0, 1, 2)
    ]
    # base model 2 starts 0.04 higher: its seeds reach the shared target sooner
    grpo = {r["base model"]: r for r in rows if r["allocator"] == "grpo"}
    per_model = analysis.get("grpo").axes["rollouts"].per_base_model
    assert per_model[2].value < per_model[0].value
    assert grpo["2"]["seed mean"] != "-"
    markdown = render_markdown(analysis)
    assert "| Allocator | Base model | seed 0 | seed 1 | seed mean |" in markdown


def test_two_base_models_are_too_few_for_an_interval(tmp_path: Path) -> None:
    run = _write_b_by_s_run(tmp_path, (0, 1), (0, 1, 2))  # 6 units, but 2 base models
    analysis = analyze_run(run, num_resamples=100)
    pc = analysis.get("pc").axes["rollouts"]
    assert pc.ci is None and pc.few_seeds and len(pc.seed_speedups) == 6


GRID = np.linspace(0, 1000, 11)
GRID_STEPS = np.arange(11) * 5


def _linear(slopes: np.ndarray, units: list) -> dict[str, SeedCurves]:
    curves = {
        u: (GRID_STEPS, GRID, 0.1 + a * GRID / 1000) for u, a in zip(units, slopes, strict=True)
    }
    return {"rollouts": SeedCurves.build(curves)}


def test_two_level_intervals_cover_when_the_effect_varies_between_base_models() -> None:
    # base model b: GRPO learns at 0.5 + u_b, the allocator at (1.25 + v_b) times that; the
    # population speedup is 1.25. Seeds only (one base model's luck taken for the truth) under-cover.
    rng = np.random.default_rng(7)
    num_models, num_seeds, trials = 5, 3, 200
    units = [(b, s) for b in range(num_models) for s in range(num_seeds)]
    flat = list(range(len(units)))
    target = lambda idx: np.full(idx.shape[0], 0.4)  # noqa: E731
    hits = {"two-level": 0, "seeds only": 0}
    for t in range(trials):
        u, v = rng.normal(0, 0.08, num_models), rng.normal(0, 0.15, num_models)
        base = np.array([0.5 + u[b] + rng.normal(0, 0.03) for b, _ in units])
        alloc = np.array([(1.25 + v[b]) * (0.5 + u[b]) + rng.normal(0, 0.0375) for b, _ in units])
        for name, labels in (("two-level", units), ("seeds only", flat)):
            low, high = bootstrap_speedups(
                _linear(base, labels), _linear(alloc, labels), target, num_resamples=1000, seed=t
            )["rollouts"]
            hits[name] += low <= 1.25 <= high
    # measured 0.94 and 0.80 (docs/report.md); nominal 95 %, 200 trials: s.e. ~1.6 points
    assert hits["two-level"] / trials >= 0.89
    assert hits["seeds only"] / trials <= 0.86


def test_one_base_model_draws_are_the_plain_seed_bootstrap_and_bands_use_the_same_draws() -> None:
    from rollcli.analysis.plots import curve_band

    seeds = [0, 1, 2, 3, 4]
    idx_b, idx_a = resample_indices(seeds, seeds, 300, np.random.default_rng(5))
    plain = np.random.default_rng(5).integers(0, 5, size=(300, 5))
    assert (idx_b == plain).all() and (idx_a == plain).all()  # intervals of older runs unchanged
    # the plot's band resamples as the table does: two-level for B x S, none when unbalanced
    units = [(b, s) for b in range(3) for s in range(2)]
    slopes = np.linspace(0.4, 0.6, 6)
    two_level = _linear(slopes, units)["rollouts"]
    assert curve_band(two_level, 0.95, num_resamples=200) is not None
    uneven = _linear(slopes[:5], units[:5])["rollouts"]
    assert curve_band(uneven, 0.95, num_resamples=200) is None
