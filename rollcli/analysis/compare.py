"""Several run folders as one comparison: ``rollcli report runs/a runs/b``.

:func:`load_runs` reads each run folder and joins their train jobs into one :class:`RunData`, so
the analysis (targets, crossings, speedups, per-seed ratios, intervals) is exactly the one of a
single run. Names: an allocator keeps its name when no other run has one by that name, else it
becomes ``<run>/<name>`` (the run folder's name). An allocator whose jobs are the very same jobs
(same content-hashed ids) in two runs — a variant folder shares its unchanged allocators with the
folder it came from — is one allocator, listed once. Seeds are paired with the baseline's seeds
of the same number wherever both exist, whichever run they come from; the others are unpaired
and the table says so.

The target is the first run's (or ``--target``'s), the baseline the first run's (or
``--baseline``'s, either ``name`` or ``run/name``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from rollcli.analysis.load import JobMetrics, RunData, TargetSpec, load_run
from rollcli.errors import StoreError

__all__ = ["load_runs", "parse_target", "spec_differences", "COMPARED_SECTIONS"]

# the spec sections that define what an allocator is compared under; runs whose sections differ
# (another pool, budget or evaluation) measure different things, and a speedup between them is void
COMPARED_SECTIONS = ("backend", "budget", "eval")


def _flatten(value: Any, prefix: str) -> dict[str, Any]:
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for key, item in value.items():
            out.update(_flatten(item, f"{prefix}.{key}"))
        return out or {prefix: {}}
    return {prefix: value}


def spec_differences(first: Mapping[str, Any], other: Mapping[str, Any]) -> list[str]:
    """Dotted keys of :data:`COMPARED_SECTIONS` whose values differ between two resolved specs,
    each as ``key: a -> b`` (``(unset)`` where one spec lacks it)."""
    a, b = {}, {}
    for section in COMPARED_SECTIONS:
        a.update(_flatten(first.get(section) or {}, section))
        b.update(_flatten(other.get(section) or {}, section))
    missing = "(unset)"
    return [
        f"{key}: {a.get(key, missing)} -> {b.get(key, missing)}"
        for key in sorted(set(a) | set(b))
        if a.get(key, missing) != b.get(key, missing)
    ]


def parse_target(text: str | None, baseline: str | None = None) -> dict[str, Any]:
    """``--target`` and ``--baseline`` as keys of the spec's ``target``: ``final``, ``peak`` (of
    the baseline), ``rise:F`` (F of the baseline's rise from its first to its final value) or a
    number (a fixed value of the metric)."""
    out: dict[str, Any] = {}
    if text is not None:
        word = text.strip().lower()
        if word in ("final", "peak"):
            out["at"] = word
        elif word.startswith("rise"):
            out.update(at="rise", value=_rise_fraction(text, word.removeprefix("rise")))
        else:
            try:
                value = float(word)
            except ValueError:
                raise StoreError(
                    f"--target {text!r}: give final, peak (the baseline's final or peak "
                    "accuracy, mean over its seeds), rise:0.5 (half of its rise) or a number "
                    "such as 0.9"
                ) from None
            if value != value or value in (float("inf"), float("-inf")):
                raise StoreError(f"--target {text!r}: a target must be a finite number")
            out.update(at="value", value=value)
    if baseline is not None:
        out["baseline"] = baseline
    return out


def _rise_fraction(text: str, rest: str) -> float:
    """The F of ``--target rise:F``: a number in (0, 1]."""
    try:
        value = float(rest.lstrip(":= "))
    except ValueError:
        value = float("nan")
    if not 0 < value <= 1:
        raise StoreError(
            f"--target {text!r}: rise takes the fraction of the baseline's rise from its first "
            "to its final accuracy, in (0, 1], e.g. rise:0.5"
        )
    return value


def _label(run: RunData, used: set[str]) -> str:
    label = run.run_dir.name or run.experiment
    while label in used:  # two folders with one name (runs/a/x and runs/b/x)
        label = f"{run.run_dir.parent.name}/{label}"
    used.add(label)
    return label


def load_runs(
    run_dirs: Sequence[str | Path],
    *,
    target: Mapping[str, Any] | None = None,
    allow_mismatch: bool = False,
) -> RunData:
    """One :class:`RunData` holding the train jobs of every run folder (see the module doc).

    Runs whose backend, budget or eval sections differ from the first run's are refused
    (:class:`StoreError` naming the keys), or with ``allow_mismatch`` compared with a warning."""
    if not run_dirs:
        raise StoreError("give at least one run folder")
    override = dict(target or {})
    wanted_baseline = override.pop("baseline", None)
    # only the first run's baseline matters: the others need not hold theirs (a variant may not)
    runs = [load_run(run_dirs[0], target=override)]
    runs += [load_run(path, target={**override, "baseline": None}) for path in run_dirs[1:]]
    if len(runs) == 1:
        if wanted_baseline is None:
            return runs[0]
        return load_run(run_dirs[0], target={**override, "baseline": wanted_baseline})
    labels: list[str] = []
    used: set[str] = set()
    for run in runs:
        labels.append(_label(run, used))
    warnings = []
    for label, run in zip(labels[1:], runs[1:], strict=True):
        diff = spec_differences(runs[0].spec, run.spec)
        if not diff:
            continue
        shown = "; ".join(diff[:8]) + (f"; and {len(diff) - 8} more" if len(diff) > 8 else "")
        what = f"{label} differs from {labels[0]} outside its allocators ({shown})"
        if not allow_mismatch:
            raise StoreError(
                f"{what}: a speedup between them would compare different experiments. "
                "Compare runs of one setting, or pass --allow-mismatch to compare anyway "
                "(the report then carries a warning)"
            )
        warnings.append(f"{what}: the comparison across these runs is not like for like")
    # one entry per distinct allocator: (label, name) -> job ids; identical job sets merge
    entries: list[tuple[str, str, RunData]] = []
    seen_jobs: dict[frozenset[str], tuple[str, str]] = {}
    alias: dict[tuple[str, str], tuple[str, str]] = {}
    for label, run in zip(labels, runs, strict=True):
        for name in run.allocators:
            ids = frozenset(j.job_id for j in run.jobs_of(name))
            if ids in seen_jobs:
                alias[(label, name)] = seen_jobs[ids]
                continue
            seen_jobs[ids] = (label, name)
            alias[(label, name)] = (label, name)
            entries.append((label, name, run))
    counts: dict[str, int] = {}
    for _, name, _ in entries:
        counts[name] = counts.get(name, 0) + 1
    display = {
        (label, name): name if counts[name] == 1 else f"{label}/{name}"
        for label, name, _ in entries
    }
    jobs: list[JobMetrics] = []
    kinds: dict[str, str] = {}
    for label, name, run in entries:
        shown = display[(label, name)]
        kinds[shown] = run.kinds.get(name, name)
        for job in run.jobs_of(name):
            jobs.append(
                JobMetrics(
                    job.job_id,
                    shown,
                    job.seed,
                    job.status,
                    job.rows,
                    run_dir=run.run_dir,
                    base_seed=job.base_seed,
                )
            )
    first = runs[0]
    base_key = alias[(labels[0], first.target.baseline)]
    if wanted_baseline is not None:
        base_key = _find(str(wanted_baseline), display, alias, labels)
    baseline = display[base_key]
    names = [display[(label, name)] for label, name, _ in entries]
    target_map = {
        "metric": first.target.metric,
        "at": first.target.at,
        "value": first.target.value,
        "smooth": first.target.smooth,
        "baseline": baseline,
    }
    spec_target = TargetSpec.from_mapping(target_map, names, kinds)
    names.remove(baseline)
    return RunData(
        run_dir=first.run_dir,
        experiment=" vs ".join(labels),
        allocators=[baseline, *names],
        kinds=kinds,
        target=spec_target,
        jobs=jobs,
        spec=first.spec,
        budget_steps=first.budget_steps,
        sources=[run.run_dir for run in runs],
        warnings=warnings,
    )


def _find(
    query: str,
    display: Mapping[tuple[str, str], str],
    alias: Mapping[tuple[str, str], tuple[str, str]],
    labels: Sequence[str],
) -> tuple[str, str]:
    if "/" in query:
        label, _, name = query.rpartition("/")
        if (label, name) in alias:
            return alias[(label, name)]
    matches = [key for key, shown in display.items() if shown == query or key[1] == query]
    if len(matches) == 1:
        return matches[0]
    valid = ", ".join(display.values())
    what = "is ambiguous" if matches else "names no allocator of these runs"
    raise StoreError(
        f"--baseline {query!r} {what}; give one of: {valid} (runs: {', '.join(labels)})"
    )
