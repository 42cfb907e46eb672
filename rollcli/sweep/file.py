"""Sweep files: a base spec plus axes, read and checked with file:line errors.

```yaml
name: pc-thresholds                          # run folder name (default: the file's stem)
base: ../experiments/sim-allocators.yaml     # a spec path (relative to this file) or a template
overrides: [budget.steps=40]                 # applied to every point
grid: {allocators.pc.p_lower: "0.0,0.125,0.25", allocators.pc.p_upper: "0.5,0.75,1.0"}
zip: {allocators.pc.n_pilot: "2,4,8", allocators.pc.n_commit: "14,12,8"}
sample: {method: sobol, count: 16, seed: 0, params: {allocators.vigor.alpha: "interval(0.25,1)"}}
seeds: "range(0,5)"                          # the seeds every point runs (an axis of repeats)
focus: [pc]                                  # allocators the ablation is about (default: all but the baseline)
scenarios:                                   # a suite: named override sets, each crossed with the axes
  default: []
  fresh-pool: [backend.num_train_prompts=131072]
holdout: [fresh-pool]                        # scenarios reported apart (kept out of every tuning decision)
```

A sweep with ``scenarios`` is a *suite*: ``rollcli report`` of its run folder prints a robustness
table over the scenarios (:mod:`rollcli.analysis.robustness`).

Overrides with several values on the command line are axes too: ``rollcli sweep FILE
key=a,b`` adds a grid axis, and ``rollcli sweep SPEC key=a,b [...]`` sweeps an experiment spec
directly (the run folder is ``<name>-<swept knobs>``), so the command ``rollcli run`` refuses
(``rollcli run SPEC key=a,b``) runs as it is with ``sweep`` in place of ``run``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rollcli.analysis.scenario import SCENARIO_KEY
from rollcli.errors import SpecError, closest, suggest
from rollcli.spec.overrides import check_override_nesting
from rollcli.sweep.axes import (
    MAX_SWEEP_POINTS,
    Axis,
    SampleAxes,
    SweepAxes,
    expand_points,
    format_value,
    parse_axis,
)

__all__ = ["Scenario", "SweepFile", "load_sweep_file", "split_sweep_overrides"]


@dataclass(frozen=True)
class Scenario:
    """One scenario of a suite: a name, the overrides that make it, and whether it is held out."""

    name: str
    overrides: tuple[str, ...]
    holdout: bool = False


KEYS = (
    "name",
    "base",
    "overrides",
    "grid",
    "zip",
    "sample",
    "seeds",
    "focus",
    "description",
    "scenarios",
    "holdout",
)
SAMPLE_KEYS = ("method", "count", "seed", "params")


@dataclass(frozen=True)
class SweepFile:
    """A parsed sweep file: where the base spec is, what every point overrides, and the axes."""

    path: Path
    name: str
    base: Path
    overrides: tuple[str, ...]
    axes: SweepAxes
    seeds: tuple[int, ...] | None
    focus: tuple[str, ...] | None
    command_line: tuple[str, ...] = ()  # the command line's plain overrides: they win over the file
    scenarios: tuple[Scenario, ...] = ()  # a suite's scenarios (empty: a plain sweep)

    @property
    def swept_keys(self) -> list[str]:
        sample = self.axes.sample.axes if self.axes.sample else ()
        head = [SCENARIO_KEY] if self.scenarios else []
        return [*head, *(a.key for a in (*self.axes.grid, *self.axes.zip, *sample))]

    def common_overrides(self) -> tuple[str, ...]:
        """Overrides every point shares: the file's, its seeds, then the command line's (which
        win, so ``rollcli sweep FILE seeds=[0,1,2]`` replaces the file's seeds)."""
        head = list(self.overrides)
        if self.seeds is not None:
            head.append(f"seeds={format_value(list(self.seeds))}")
        return (*head, *self.command_line)

    def points(self) -> list[tuple[tuple[str, Any], ...]]:
        """Every point's own axis values as ``(key, value)`` pairs."""
        return expand_points(self.axes)


def _error(mark: Any, field: str, message: str) -> SpecError:
    return SpecError(f"{mark}: {field}: {message}")


def _axes(
    section: Any, field: str, marks: Any, *, allow_interval: bool = False
) -> tuple[Axis, ...]:
    if section is None:
        return ()
    if not isinstance(section, dict):
        raise _error(
            marks.find((field,)), field, f"expected a mapping of key: values, found {section!r}"
        )
    axes = []
    for key, text in section.items():
        where = (*field.split("."), key)
        try:
            axes.append(parse_axis(str(key), text, allow_interval=allow_interval))
        except ValueError as error:
            raise _error(marks.find(where), f"{field}.{key}", str(error)) from None
    return tuple(axes)


def _scenarios(data: dict[str, Any], marks: Any) -> tuple[Scenario, ...]:
    import re

    from rollcli.spec.models import NAME_MAX, NAME_PATTERN

    section = data.get("scenarios")
    holdout = data.get("holdout")
    if section is None:
        if holdout is not None:
            raise _error(marks.find(("holdout",)), "holdout", "needs scenarios: to hold some out")
        return ()
    if not isinstance(section, dict) or not section:
        raise _error(
            marks.find(("scenarios",)),
            "scenarios",
            f"expected a mapping of name: [key=value, ...], found {section!r}",
        )
    scenarios = []
    for name, overrides in section.items():
        where = marks.find(("scenarios", name), key=True)
        if not isinstance(name, str) or not re.match(NAME_PATTERN, name) or len(name) > NAME_MAX:
            raise _error(
                where,
                f"scenarios.{name}",
                "a scenario name uses letters, digits, '_' and '-' (at most 100 characters)",
            )
        overrides = overrides or []
        if not isinstance(overrides, list) or not all(isinstance(o, str) for o in overrides):
            raise _error(
                marks.find(("scenarios", name)),
                f"scenarios.{name}",
                f"expected a list of key=value strings, found {overrides!r}",
            )
        scenarios.append((name, tuple(overrides)))
    names = [name for name, _ in scenarios]
    held = holdout or []
    if not isinstance(held, list) or not all(isinstance(h, str) for h in held):
        raise _error(marks.find(("holdout",)), "holdout", "expected a list of scenario names")
    for name in held:
        if name not in names:
            hint = suggest(name, names, sentence=True)
            raise _error(
                marks.find(("holdout",)),
                "holdout",
                f"'{name}' is not a scenario.{hint} Scenarios: {', '.join(names)}.",
            )
    if held and len(set(held)) == len(names):
        raise _error(
            marks.find(("holdout",)), "holdout", "holds out every scenario: keep some to tune on"
        )
    return tuple(Scenario(name, overrides, name in held) for name, overrides in scenarios)


def _resolve_base(base: Any, path: Path, marks: Any) -> Path:
    if not isinstance(base, str) or not base:
        raise _error(marks.find(("base",)), "base", f"expected a spec path, found {base!r}")
    candidate = (path.parent / base).resolve()
    if candidate.exists():
        return candidate
    from rollcli.spec.templates import template_names, templates_dir

    template = templates_dir() / f"{base}.yaml"
    if template.exists():
        return template
    close = closest(base, template_names())
    suggestion = f" Did you mean template '{close}'?" if close else ""
    raise _error(marks.find(("base",)), "base", f"no spec at {candidate}.{suggestion}")


def split_sweep_overrides(overrides: Sequence[str]) -> tuple[list[str], list[Axis]]:
    """Command-line overrides as ``(plain overrides, grid axes)``: ``key=a,b``, ``key=range(..)``
    and the other Hydra sweeps become axes; everything else applies to every point."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import HydraException

    parser = OverridesParser.create()
    plain: list[str] = []
    axes: list[Axis] = []
    for text in overrides:
        check_override_nesting(text, f"override '{text[:200]}'")
        try:
            (override,) = parser.parse_overrides([text])
        except (HydraException, RecursionError):
            plain.append(text)  # the spec loader reports it, with the grammar
            continue
        if not override.is_sweep_override():
            plain.append(text)
            continue
        key, _, values = text.partition("=")
        if key.startswith(("+", "~")):
            raise SpecError(f"override '{text}': an axis changes a key; drop the '{key[0]}'")
        try:
            axes.append(parse_axis(key, values))
        except ValueError as error:
            raise SpecError(f"override '{text}': {error}") from None
    return plain, axes


def _is_spec(data: Any) -> bool:
    return (
        isinstance(data, dict)
        and "base" not in data
        and any(k in data for k in ("backend", "allocators", "budget", "extends"))
    )


def load_sweep_file(path: str | Path, extra_overrides: Sequence[str] = ()) -> SweepFile:
    """Read a sweep file; ``extra_overrides`` (from the command line) apply to every point, those
    with several values (``key=a,b``) are grid axes. An experiment spec in place of a sweep file
    is swept over those axes alone."""
    from rollcli.spec.yamlio import load_yaml

    path = Path(path)
    if not path.exists():
        raise SpecError(f"{path}: no such sweep file")
    data, marks = load_yaml(path)
    extra, extra_axes = split_sweep_overrides(extra_overrides)
    if _is_spec(data):
        if not extra_axes:
            raise SpecError(
                f"{path} is an experiment spec, not a sweep file: name the values to sweep, e.g. "
                f"rollcli sweep {path} budget.steps=20,40 --dry-run (or write a sweep file: "
                "docs/sweeps.md)"
            )
        knobs = "-".join(dict.fromkeys(a.key.rsplit(".", 1)[-1] for a in extra_axes))
        return SweepFile(
            path=path,
            name=f"{data.get('name') or path.stem}-{knobs}",
            base=path.resolve(),
            overrides=(),
            axes=SweepAxes(tuple(extra_axes), (), None),
            seeds=None,
            focus=None,
            command_line=tuple(extra),
        )
    for key in data:
        if key not in KEYS:
            hint = suggest(key, KEYS, sentence=True)
            raise _error(
                marks.find((key,), key=True),
                str(key),
                f"unknown key.{hint} Valid: {', '.join(KEYS)}.",
            )
    if "base" not in data:
        raise _error(f"{path}:1:1", "base", "missing: name the spec every point starts from")
    base = _resolve_base(data["base"], path, marks)
    overrides = data.get("overrides") or []
    if not isinstance(overrides, list) or not all(isinstance(o, str) for o in overrides):
        raise _error(
            marks.find(("overrides",)), "overrides", "expected a list of key=value strings"
        )
    grid = _axes(data.get("grid"), "grid", marks)
    zipped = _axes(data.get("zip"), "zip", marks)
    swept = {a.key for a in (*grid, *zipped)}
    for axis in extra_axes:
        if axis.key in swept:
            raise SpecError(
                f"{path}: {axis.key} is an axis of the file already; drop it or the override"
            )
    grid = (*grid, *extra_axes)
    sample = None
    if data.get("sample") is not None:
        section = data["sample"]
        if not isinstance(section, dict):
            raise _error(marks.find(("sample",)), "sample", "expected a mapping")
        for key in section:
            if key not in SAMPLE_KEYS:
                raise _error(
                    marks.find(("sample", key), key=True),
                    f"sample.{key}",
                    f"unknown key. Valid: {', '.join(SAMPLE_KEYS)}.",
                )
        method = section.get("method", "sobol")
        if method not in ("random", "sobol"):
            raise _error(
                marks.find(("sample", "method")),
                "sample.method",
                f"expected random or sobol, found {method!r}",
            )
        count = section.get("count")
        if not isinstance(count, int) or isinstance(count, bool) or count < 1:
            raise _error(
                marks.find(("sample", "count")),
                "sample.count",
                f"expected a positive int, found {count!r}",
            )
        if count > MAX_SWEEP_POINTS:
            raise _error(
                marks.find(("sample", "count")),
                "sample.count",
                f"{count:,} is more than a sweep's {MAX_SWEEP_POINTS:,} points",
            )
        seed = section.get("seed", 0)
        params = _axes(section.get("params"), "sample.params", marks, allow_interval=True)
        sample = SampleAxes(method, count, int(seed), params)
    seeds = None
    if data.get("seeds") is not None:
        try:
            axis = parse_axis("seeds", data["seeds"])
        except ValueError as error:
            raise _error(marks.find(("seeds",)), "seeds", str(error)) from None
        if not all(isinstance(s, int) and not isinstance(s, bool) and s >= 0 for s in axis.values):
            raise _error(
                marks.find(("seeds",)),
                "seeds",
                f"expected non-negative ints, found {list(axis.values)}",
            )
        seeds = tuple(int(s) for s in axis.values)
    focus = data.get("focus")
    if focus is not None and (
        not isinstance(focus, list) or not all(isinstance(f, str) for f in focus)
    ):
        raise _error(marks.find(("focus",)), "focus", "expected a list of allocator names")
    scenarios = _scenarios(data, marks)
    if scenarios and any(a.key == SCENARIO_KEY for a in (*grid, *zipped)):
        raise SpecError(f"{path}: '{SCENARIO_KEY}' names the suite's scenarios, not an axis")
    axes = SweepAxes(grid, zipped, sample)
    try:
        expand_points(axes)
    except ValueError as error:
        raise _error(f"{path}:1:1", "axes", str(error)) from None
    return SweepFile(
        path=path,
        name=str(data.get("name") or path.stem),
        base=base,
        overrides=tuple(overrides),
        axes=axes,
        seeds=seeds,
        focus=tuple(focus) if focus else None,
        command_line=tuple(extra),
        scenarios=scenarios,
    )
