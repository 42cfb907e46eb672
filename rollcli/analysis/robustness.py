"""The robustness table of a suite: each allocator's speedup in every scenario, its wins, ties and
losses against the baseline, and its geometric mean, the hold-out scenarios apart.

A suite is a sweep with ``scenarios`` (:mod:`rollcli.sweep.file`); each scenario is analysed
exactly as ``rollcli report`` analyses one experiment (:func:`rollcli.analysis.ablation.
analyze_sweep`: its own baseline, its own target, the report's intervals), and this module only
aggregates those per-scenario results:

- **outcome** per scenario: ``win`` when the speedup's interval lies above 1, ``loss`` when it
  lies below 1, ``tie`` when it contains 1; ``loss`` as well when the allocator never reaches the
  target (an upper bound ``<= x``: it does not reach the baseline's accuracy at all), ``win`` when
  only the baseline never reaches it (a lower bound ``>= x`` with ``x >= 1``); ``n/a`` for an exact
  speedup without an interval (under 5 seeds) and anything else;
- **geometric mean** over the scenarios of each group (the suite, the hold-out) of the point
  speedups; a bound when some scenario is one (all of one direction), else ``n/a``. Its interval
  combines the per-scenario intervals on the log scale, taken as independent normal errors (each
  side's half-width over z, so an asymmetric interval keeps its shape): ``exp(mean log s +- z *
  sqrt(sum se_i^2) / k)``. That is an approximation on top of whatever interval the report gives
  per scenario, and it is absent when any scenario has none;
- **worst**: the lowest point speedup of the group (the "no scenario below x" check).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from statistics import NormalDist
from typing import Any

from rollcli.analysis.curves import Bounded
from rollcli.analysis.scenario import SCENARIO_KEY

__all__ = [
    "ScenarioResult",
    "GroupSummary",
    "AllocatorRobustness",
    "Robustness",
    "outcome",
    "geometric_mean",
    "robustness",
    "robustness_table",
    "robustness_markdown",
    "robustness_json",
]

OUTCOMES = ("win", "tie", "loss")


@dataclass(frozen=True)
class ScenarioResult:
    """One allocator in one scenario."""

    scenario: str
    holdout: bool
    speedup: Bounded
    ci: tuple[float, float] | None
    outcome: str  # win | tie | loss | n/a
    final_accuracy: float
    baseline_final_accuracy: float
    reached: float
    num_seeds: int


@dataclass(frozen=True)
class GroupSummary:
    """One allocator over a group of scenarios (the suite or its hold-out)."""

    scenarios: tuple[str, ...]
    geomean: Bounded
    ci: tuple[float, float] | None
    wins: int
    ties: int
    losses: int
    undecided: int  # outcome n/a
    worst: Bounded  # the lowest point speedup (a bound when that scenario's is)

    def record(self) -> str:
        text = f"{self.wins}/{self.ties}/{self.losses}"
        return text + (f" (+{self.undecided} n/a)" if self.undecided else "")


@dataclass(frozen=True)
class AllocatorRobustness:
    allocator: str
    results: tuple[ScenarioResult, ...]
    suite: GroupSummary
    holdout: GroupSummary | None


@dataclass
class Robustness:
    name: str
    baseline: str
    scenarios: list[str]
    holdout: list[str]
    confidence: float
    allocators: list[AllocatorRobustness] = field(default_factory=list)


def outcome(speedup: Bounded, ci: tuple[float, float] | None) -> str:
    """Win, tie or loss against the baseline (module docstring); ``n/a`` when undecided."""
    if speedup.kind == "upper":
        return "loss"
    if speedup.kind == "lower":
        return "win" if speedup.value >= 1.0 else "n/a"
    if speedup.kind != "exact" or ci is None:
        return "n/a"
    low, high = ci
    if low > 1.0:
        return "win"
    if high < 1.0:
        return "loss"
    return "tie"


def geometric_mean(
    speedups: list[Bounded],
    cis: list[tuple[float, float] | None],
    *,
    confidence: float = 0.95,
) -> tuple[Bounded, tuple[float, float] | None]:
    """The geometric mean of ``speedups`` and its interval from the per-item ``cis`` (module
    docstring). Bounds of one direction give a bound; mixed bounds or unknowns give ``n/a``."""
    if not speedups:
        return Bounded.unknown(), None
    kinds = {s.kind for s in speedups}
    values = [s.value for s in speedups]
    if "unknown" in kinds or not all(math.isfinite(v) and v > 0 for v in values):
        return Bounded.unknown(), None
    bounds = kinds - {"exact"}
    if len(bounds) > 1:
        return Bounded.unknown(), None
    logs = [math.log(v) for v in values]
    center = sum(logs) / len(logs)
    kind = next(iter(bounds)) if bounds else "exact"
    value = Bounded(math.exp(center), kind)  # type: ignore[arg-type]
    if bounds or any(ci is None for ci in cis):
        return value, None
    z = NormalDist().inv_cdf(0.5 + confidence / 2)
    low_var = high_var = 0.0
    for log_s, ci in zip(logs, cis, strict=True):
        assert ci is not None
        low_var += ((log_s - math.log(ci[0])) / z) ** 2
        high_var += ((math.log(ci[1]) - log_s) / z) ** 2
    k = len(logs)
    return value, (
        math.exp(center - z * math.sqrt(low_var) / k),
        math.exp(center + z * math.sqrt(high_var) / k),
    )


def _summary(results: list[ScenarioResult], confidence: float) -> GroupSummary:
    geomean, ci = geometric_mean(
        [r.speedup for r in results], [r.ci for r in results], confidence=confidence
    )
    counts = {o: sum(r.outcome == o for r in results) for o in OUTCOMES}
    finite = [r for r in results if math.isfinite(r.speedup.value)]
    worst = min(finite, key=lambda r: r.speedup.value).speedup if finite else Bounded.unknown()
    return GroupSummary(
        tuple(r.scenario for r in results),
        geomean,
        ci,
        counts["win"],
        counts["tie"],
        counts["loss"],
        len(results) - sum(counts.values()),
        worst,
    )


def robustness(ablation: Any, *, confidence: float = 0.95) -> Robustness:
    """Aggregate a suite's ablation (:class:`rollcli.analysis.ablation.Ablation` whose points carry
    a ``scenario`` value) into the robustness table."""
    holdout = set(ablation.holdout)
    scenarios = list(ablation.scenarios)
    out = Robustness(
        ablation.name,
        ablation.baseline,
        [s for s in scenarios if s not in holdout],
        [s for s in scenarios if s in holdout],
        confidence,
    )
    # a suite crossed with axes: one row per allocator and combination of the other axes' values
    rows: dict[str, dict[str, Any]] = {}
    for r in ablation.results:
        others = ", ".join(
            f"{k.rsplit('.', 1)[-1]}={v}" for k, v in r.values.items() if k != SCENARIO_KEY
        )
        label = f"{r.allocator} ({others})" if others else r.allocator
        rows.setdefault(label, {})[r.values[SCENARIO_KEY]] = r
    for name, by_scenario in rows.items():
        results = [
            ScenarioResult(
                scenario,
                scenario in holdout,
                r.speedup,
                r.ci,
                outcome(r.speedup, r.ci),
                r.final_accuracy,
                r.baseline_final_accuracy,
                r.reached,
                r.num_seeds,
            )
            for scenario in scenarios
            if (r := by_scenario.get(scenario)) is not None
        ]
        if not results:
            continue
        suite = [r for r in results if not r.holdout]
        held = [r for r in results if r.holdout]
        out.allocators.append(
            AllocatorRobustness(
                name,
                tuple(results),
                _summary(suite, confidence),
                _summary(held, confidence) if held else None,
            )
        )
    return out


def _cell(speedup: Bounded, ci: tuple[float, float] | None, sep: str = " ") -> str:
    text = speedup.display()
    return text + (f"{sep}[{ci[0]:.2f}, {ci[1]:.2f}]" if ci else "")


def _result_cell(result: ScenarioResult | None, sep: str = " ") -> str:
    if result is None:
        return ""
    return f"{_cell(result.speedup, result.ci, sep)}{sep}{result.outcome}"


def _rows(rob: Robustness, scenarios: list[str], held: bool, sep: str) -> list[list[str]]:
    rows = []
    for entry in rob.allocators:
        summary = entry.holdout if held else entry.suite
        if summary is None:
            continue
        by = {r.scenario: r for r in entry.results}
        rows.append(
            [
                entry.allocator,
                *(_result_cell(by.get(s), sep) for s in scenarios),
                _cell(summary.geomean, summary.ci, sep),
                summary.record(),
                summary.worst.display(),
            ]
        )
    return rows


def _headers(scenarios: list[str]) -> list[str]:
    return ["allocator", *scenarios, "geo. mean", "W/T/L", "worst"]


def robustness_table(rob: Robustness, *, held: bool = False) -> Any:
    """A rich table: allocators x scenarios (the hold-out ones with ``held``)."""
    from rich.table import Table

    scenarios = rob.holdout if held else rob.scenarios
    what = "hold-out scenarios" if held else "suite"
    table = Table(
        title=f"{rob.name}: speedup vs {rob.baseline} per scenario ({what}), "
        f"{rob.confidence:.0%} intervals; W/T/L against {rob.baseline} (tie: the interval holds 1)",
        title_justify="left",
    )
    widest = max((len(e.allocator) for e in rob.allocators), default=9)
    for header in _headers(scenarios):
        if header == "allocator":  # names stay whole; a narrow terminal folds the numbers
            table.add_column(header, justify="left", no_wrap=True, min_width=widest)
        else:
            table.add_column(header, justify="right", overflow="fold")
    for row in _rows(rob, scenarios, held, "\n"):
        table.add_row(*row)
    return table


def robustness_markdown(rob: Robustness) -> str:
    """The robustness tables as markdown (the suite, then the hold-out)."""
    from rollcli.analysis.report import markdown_table
    from rollcli.text import plural

    parts = [
        f"# Robustness: {rob.name}",
        "",
        f"Speedup in rollouts to the target against `{rob.baseline}`, per scenario (each analysed "
        f"as `rollcli report` analyses one experiment), with {rob.confidence:.0%} intervals and "
        "the outcome: win (interval above 1), tie (it holds 1), loss (below 1, or the target "
        "never reached). Geometric mean over the group's scenarios, its interval combined from "
        "theirs on the log scale; worst: the lowest speedup (docs/suite.md).",
        "",
        f"## Suite ({plural(len(rob.scenarios), 'scenario')})",
        "",
        markdown_table(_headers(rob.scenarios), _rows(rob, rob.scenarios, False, " ")),
        "",
    ]
    if rob.holdout:
        parts += [
            f"## Hold-out ({plural(len(rob.holdout), 'scenario')}, kept out of every design decision)",
            "",
            markdown_table(_headers(rob.holdout), _rows(rob, rob.holdout, True, " ")),
            "",
        ]
    return "\n".join(parts)


def _summary_json(summary: GroupSummary | None) -> dict[str, Any] | None:
    if summary is None:
        return None
    return {
        "scenarios": list(summary.scenarios),
        "geomean": summary.geomean.to_json(),
        "ci_low": None if summary.ci is None else summary.ci[0],
        "ci_high": None if summary.ci is None else summary.ci[1],
        "wins": summary.wins,
        "ties": summary.ties,
        "losses": summary.losses,
        "undecided": summary.undecided,
        "worst": summary.worst.to_json(),
    }


def robustness_json(rob: Robustness) -> dict[str, Any]:
    """The robustness table as JSON (``report.json``'s ``robustness``)."""
    return {
        "name": rob.name,
        "baseline": rob.baseline,
        "confidence": rob.confidence,
        "scenarios": rob.scenarios,
        "holdout": rob.holdout,
        "allocators": {
            entry.allocator: {
                "scenarios": {
                    r.scenario: {
                        "holdout": r.holdout,
                        "speedup": r.speedup.to_json(),
                        "ci_low": None if r.ci is None else r.ci[0],
                        "ci_high": None if r.ci is None else r.ci[1],
                        "outcome": r.outcome,
                        "final_accuracy": r.final_accuracy,
                        "baseline_final_accuracy": r.baseline_final_accuracy,
                        "reached": r.reached if math.isfinite(r.reached) else None,
                        "num_seeds": r.num_seeds,
                    }
                    for r in entry.results
                },
                "suite": _summary_json(entry.suite),
                "holdout": _summary_json(entry.holdout),
            }
            for entry in rob.allocators
        },
    }
