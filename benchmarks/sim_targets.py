"""Rollouts-to-target on the sim: runs (optionally cached and in parallel) and their statistics.

Used by ``benchmarks/bench_core.py`` part (c). One *scenario* is a sim config, a per-step budget
and a step count; every allocator runs on it for every seed. The statistics are
``rollcli.analysis``'s (the ones ``rollcli report`` prints): the target is the baseline's final
held-out accuracy averaged over its seeds, an allocator's rollouts-to-target is where its
seed-mean curve first reaches it (linear between steps), speedup = the baseline's rollouts /
the allocator's, and the 95 % interval is the expanded percentile bootstrap over seeds (pairs
of runs with the same seed drawn together, the target re-estimated in every resample), given only
from ``MIN_INTERVAL_SEEDS`` (5) seeds a side up, as ``rollcli report`` does.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from rollcli.analysis.analyze import MIN_INTERVAL_SEEDS, too_few_for_interval
from rollcli.analysis.stats import SeedCurves, bootstrap_speedups, crossings
from rollcli.jobs.train import create_job_loop

ROOT = Path(__file__).resolve().parents[1]
# the code a run's result depends on: a cached run is reused only while these are unchanged
_CODE = ["rollcli/allocators", "rollcli/backends/sim", "rollcli/backends/minibatches.py",
         "rollcli/train"]  # fmt: skip


@dataclass(frozen=True)
class Scenario:
    """A sim config (knobs changed from ``SimConfig()``), a per-step budget and a step count."""

    name: str
    budget: int
    steps: int
    backend: Mapping[str, Any] = field(default_factory=dict)


def job_config(kind: str, allocator: Mapping[str, Any], seed: int, scenario: Scenario) -> dict:
    return {
        "job": {"id": f"{kind}-{seed}", "type": "train", "allocator": kind, "seed": seed},
        "backend": {"kind": "sim", **scenario.backend},
        "allocator": dict(allocator),
        "budget": {"steps": scenario.steps, "rollouts_per_step": scenario.budget},
        "eval": {"every": 1},
    }


def run_curve(config: Mapping[str, Any]) -> dict[str, list[float]]:
    """One run, evaluated after every step: the curves and counters the tables need."""
    loop = create_job_loop(config)
    rows = [loop.initial_row()]
    while not loop.done:
        rows.append(loop.run_step())
    steps = rows[1:]
    return {
        "rollouts": [float(r["cum_rollouts"]) for r in rows],
        "tokens": [float(r["cum_tokens"]) for r in rows],
        "acc": [float(r["eval/accuracy"]) for r in rows],
        "trained": [float(r["rollouts_trained"]) for r in steps],
        "zero_var": [float(r["zero_var_frac"]) for r in steps],
        "noise_scale": [float(r.get("train/noise_scale", math.nan)) for r in steps],
        "evicted": [float(r["evicted"]) for r in steps],
    }


def _code_hash() -> str:
    digest = hashlib.sha256()
    for entry in _CODE:
        path = ROOT / entry
        files = sorted(path.rglob("*.py")) if path.is_dir() else [path]
        for file in files:
            digest.update(str(file.relative_to(ROOT)).encode())
            digest.update(file.read_bytes())
    return digest.hexdigest()[:16]


def _cache_path(cache: Path, config: Mapping[str, Any], code: str) -> Path:
    key = hashlib.sha256(json.dumps([code, config], sort_keys=True).encode()).hexdigest()[:24]
    return cache / f"{key}.json"


def _run_cached(args: tuple[dict, str | None, str]) -> dict[str, list[float]]:
    config, cache, code = args
    if cache is None:
        return run_curve(config)
    path = _cache_path(Path(cache), config, code)
    if path.exists():
        return json.loads(path.read_text())
    result = run_curve(config)
    from rollcli.store.atomic import atomic_write_text

    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, json.dumps(result))
    return result


def run_all(
    configs: Sequence[dict], *, jobs: int = 1, cache: Path | None = None
) -> list[dict[str, list[float]]]:
    """Run every job config (``jobs`` processes; results cached in ``cache`` by config and code)."""
    code = _code_hash()
    args = [(c, None if cache is None else str(cache), code) for c in configs]
    if jobs <= 1:
        return [_run_cached(a) for a in args]
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    with ProcessPoolExecutor(max_workers=jobs) as pool:
        return list(pool.map(_run_cached, args, chunksize=1))


# -- statistics ------------------------------------------------------------------------------
def curves_of(runs: Mapping[int, Mapping[str, list[float]]], axis: str = "rollouts") -> SeedCurves:
    """Seed curves of one allocator's runs (``{seed: run}``) on ``axis``."""
    return SeedCurves.build(
        {
            s: (np.arange(len(r["acc"])), np.array(r[axis]), np.array(r["acc"]))
            for s, r in runs.items()
        }
    )


@dataclass(frozen=True)
class Speedup:
    """Rollouts-to-target of an allocator against a baseline's final accuracy."""

    target: float
    baseline_x: float
    x: float | None  # None: the seed-mean curve never reached the target
    speedup: float | None
    interval: tuple[float, float] | None
    bound: float | None  # speedup < bound when not reached


def speedup(base: SeedCurves, alloc: SeedCurves, *, resamples: int = 2000) -> Speedup:
    """The allocator's speedup over ``base`` (module docstring), with its bootstrap interval."""
    target = float(base.finals.mean())
    goal = np.array([target])
    bx, breached = crossings(*base.mean_curves(base.all_seeds()), goal)
    ax, areached = crossings(*alloc.mean_curves(alloc.all_seeds()), goal)
    base_x = float(bx[0])
    interval = None  # where `rollcli report` would give none (docs/report.md, "Few seeds")
    if not too_few_for_interval(base.seeds, alloc.seeds):
        interval = bootstrap_speedups(
            {"rollouts": base},
            {"rollouts": alloc},
            lambda idx: base.finals[idx].mean(axis=1),
            num_resamples=resamples,
        )["rollouts"]
    if not areached[0]:
        return Speedup(target, base_x, None, None, interval, base_x / float(ax[0]))
    return Speedup(target, base_x, float(ax[0]), base_x / float(ax[0]), interval, None)


def mean_over(runs: Iterable[Mapping[str, list[float]]], key: str, part: slice) -> float:
    """Mean over runs of each run's mean of ``key`` over ``part`` of its steps (nan ignored)."""
    values = [np.array(r[key])[part] for r in runs]
    finite = [float(np.mean(v[np.isfinite(v)])) for v in values if np.isfinite(v).any()]
    return float(np.mean(finite)) if finite else math.nan


# -- part (c) of bench_core: the plan of runs and its three tables ---------------------------
@dataclass(frozen=True)
class TargetPlan:
    """Every run of part (c): allocators x seeds per scenario, plus uniform's learning-rate grid."""

    kinds: Sequence[str]
    allocators: Mapping[str, Mapping[str, Any]]  # kind -> allocator config
    seeds: Sequence[int]
    main: Scenario
    noise_levels: Sequence[float]  # score_noise values of the sensitivity table (main's included)
    lr_grid: Sequence[float]  # uniform's learning rates (main's included)

    def scenario(self, score_noise: float) -> Scenario:
        if score_noise == self.main.backend.get("score_noise"):
            return self.main
        return Scenario(
            f"score_noise={score_noise:g}",
            self.main.budget,
            self.main.steps,
            {**self.main.backend, "score_noise": score_noise},
        )

    def runs(self) -> list[tuple[tuple[str, str, int], dict]]:
        """``((scenario name, label, seed), job config)``; label = kind or ``uniform@lr=<lr>``."""
        out = []
        scenarios = [self.main] + [
            self.scenario(s) for s in self.noise_levels if self.scenario(s) is not self.main
        ]
        for sc in scenarios:
            for kind in self.kinds:
                for seed in self.seeds:
                    out.append(
                        ((sc.name, kind, seed), job_config(kind, self.allocators[kind], seed, sc))
                    )
        for lr in self.lr_grid:
            if lr == self.main.backend.get("lr"):
                continue
            sc = Scenario(self.main.name, self.main.budget, self.main.steps,
                          {**self.main.backend, "lr": lr})  # fmt: skip
            for seed in self.seeds:
                out.append(((sc.name, f"uniform@lr={lr:g}", seed),
                            job_config("uniform", self.allocators["uniform"], seed, sc)))  # fmt: skip
        return out


def _ci(value: Speedup) -> str:
    if value.speedup is None:
        bound = f" (< {value.bound:.2f})" if value.bound is not None else ""
        return "not reached" + bound
    text = f"{value.speedup:.2f}"
    if value.interval is not None:
        text += f" [{value.interval[0]:.2f}, {value.interval[1]:.2f}]"
    return text


def _seeds_reached(runs: Mapping[int, Mapping[str, list[float]]], target: float) -> int:
    tol = 1e-9 * max(1.0, abs(target))
    return sum(max(r["acc"]) >= target - tol for r in runs.values())


def target_tables(
    plan: TargetPlan, results: Mapping[tuple[str, str, int], Mapping[str, list[float]]]
) -> tuple[list[tuple[str, list[str], list[list[str]]]], dict[str, Any]]:
    """The allocator table, the learning-rate table and the sensitivity table; and a summary."""

    def runs_of(scenario: str, label: str) -> dict[int, Mapping[str, list[float]]]:
        return {s: results[(scenario, label, s)] for s in plan.seeds}

    main = plan.main
    steps = main.steps
    start, end = slice(0, 5), slice(-10, None)
    default_lr = main.backend.get("lr")
    lr_labels = {
        lr: ("uniform" if lr == default_lr else f"uniform@lr={lr:g}") for lr in plan.lr_grid
    }
    finals = {lr: float(np.mean([r["acc"][-1] for r in runs_of(main.name, lab).values()]))
              for lr, lab in lr_labels.items()}  # fmt: skip
    best_lr = max(plan.lr_grid, key=lambda lr: (finals[lr], -abs(lr - (default_lr or 0))))
    base = curves_of(runs_of(main.name, "uniform"))
    best = curves_of(runs_of(main.name, lr_labels[best_lr]))
    seeds = f"{len(plan.seeds)} seeds ({plan.seeds[0]}-{plan.seeds[-1]})"
    summary: dict[str, Any] = {"best_lr": best_lr, "finals_by_lr": finals}

    rows = []
    for kind in plan.kinds:
        runs = runs_of(main.name, kind)
        curves = curves_of(runs)
        vs_base, vs_best = speedup(base, curves), speedup(best, curves)
        tok = speedup(curves_of(runs_of(main.name, "uniform"), "tokens"),
                      curves_of(runs, "tokens")).speedup  # fmt: skip
        acc = np.array([r["acc"][-1] for r in runs.values()])
        generated = np.mean([r["rollouts"][-1] / steps for r in runs.values()])
        trained = np.mean([np.sum(r["trained"]) / steps for r in runs.values()])
        summary[kind] = vs_base
        rows.append([
            kind,
            f"{_seeds_reached(runs, vs_base.target)}/{len(plan.seeds)}",
            "-" if vs_base.x is None else f"{vs_base.x / 1e6:.3f}",
            _ci(vs_base),
            _ci(vs_best),
            "not reached" if tok is None else f"{tok:.2f}",
            f"{acc.mean():.4f} ({acc.std():.4f})",
            f"{generated:.0f}",
            f"{trained:.0f}",
            f"{mean_over(runs.values(), 'zero_var', start):.2f} -> {mean_over(runs.values(), 'zero_var', end):.2f}",
            f"{mean_over(runs.values(), 'noise_scale', start):.2f} -> {mean_over(runs.values(), 'noise_scale', end):.2f}",
            f"{np.mean([r['evicted'][-1] for r in runs.values()]):.0f}",
        ])  # fmt: skip
    first = (
        f"(c) Rollouts-to-target, default sim scenario ({main.budget} rollouts/step, {steps} "
        f"steps, {seeds}; target = uniform's final held-out accuracy, mean over seeds "
        f"({base.finals.mean():.4f}); speedup = uniform's rollouts to it / the allocator's, from "
        f"the seed-mean curves, [95 % expanded-percentile bootstrap over seeds; none under "
        f"{MIN_INTERVAL_SEEDS} seeds]; vs best-lr: the "
        f"same against uniform at lr={best_lr:g}, the best of the grid "
        f"({best.finals.mean():.4f}); zero-var: share of generated groups, first 5 -> last 10 "
        f"steps; noise scale: B_noise / mini-batch rollouts, same steps)",
        [
            "allocator",
            "seeds reaching target",
            "rollouts to target (M)",
            "speedup vs uniform",
            "speedup vs best-lr uniform",
            "token speedup",
            "final acc (sd)",
            "generated/step",
            "trained/step",
            "zero-var groups",
            "noise scale",
            "evicted",
        ],  # fmt: skip
        rows,
    )

    lr_rows = []
    for lr in plan.lr_grid:
        runs = runs_of(main.name, lr_labels[lr])
        curves = curves_of(runs)
        acc = np.array([r["acc"][-1] for r in runs.values()])
        lr_rows.append([
            f"{lr:g}" + (" (default)" if lr == default_lr else "") + (" best" if lr == best_lr else ""),
            f"{acc.mean():.4f} ({acc.std():.4f})",
            _ci(speedup(base, curves)),
            f"{mean_over(runs.values(), 'zero_var', end):.2f}",
        ])  # fmt: skip
    second = (
        f"(c) Uniform (GRPO) at each learning rate of the grid, default scenario, {seeds}; "
        "best = highest mean final accuracy; speedup against uniform at the default lr",
        ["lr", "final acc (sd)", "speedup vs default-lr uniform", "zero-var groups, last 10 steps"],
        lr_rows,
    )

    levels = list(plan.noise_levels)
    sens: dict[float, dict[str, Speedup]] = {}
    header_scale = []
    for level in levels:
        sc = plan.scenario(level)
        base_l = curves_of(runs_of(sc.name, "uniform"))
        sens[level] = {k: speedup(base_l, curves_of(runs_of(sc.name, k))) for k in plan.kinds}
        uni = runs_of(sc.name, "uniform").values()
        header_scale.append(
            f"score_noise {level:g} (noise scale {mean_over(uni, 'noise_scale', start):.2f} -> "
            f"{mean_over(uni, 'noise_scale', end):.2f}; target {base_l.finals.mean():.3f})"
        )
    best_at = {
        level: max(
            (k for k in plan.kinds if k != "uniform"),
            key=lambda k: -1.0 if sens[level][k].speedup is None else sens[level][k].speedup,
        )
        for level in levels
    }
    summary["best_at_noise"] = best_at
    sens_rows = []
    for kind in plan.kinds:
        cells = []
        for level in levels:
            cell = _ci(sens[level][kind])
            cells.append(f"**{cell}**" if best_at[level] == kind else cell)
        sens_rows.append([kind, *cells])
    third = (
        f"(c) Sensitivity to the per-step signal-to-noise ratio: speedup vs uniform at each "
        f"score_noise (the default is {main.backend.get('score_noise')}), {seeds}, "
        f"{main.budget} rollouts/step, {steps} steps; bold: the best allocator of the column",
        ["allocator", *header_scale],
        sens_rows,
    )
    return [first, second, third], summary
