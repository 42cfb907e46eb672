"""Reading run files that may be damaged (a torn copy, a full disk, a hand edit) without a
traceback: each problem becomes one warning line naming the file and line, and the reader goes
on with what it can trust.

- :func:`manifest_from_folders` rebuilds a run's manifest from ``spec.yaml`` and the job folders'
  ``config.yaml`` when ``manifest.json`` is torn (``rollcli status`` and ``report`` use it);
- :func:`metrics_rows` reads a ``metrics.jsonl`` leniently: lines that are not JSON objects are
  skipped, and a row whose ``step`` or a numeric metric (``cum_*``, ``eval/*``, ...) is not a
  number loses that value (or the whole row, for ``step``), each with a warning.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from rollcli.store.atomic import read_jsonl_lenient
from rollcli.store.folders import RunFolder

__all__ = ["is_number", "manifest_from_folders", "metrics_rows", "reset_warnings", "warn"]

_NUMERIC = ("step", "cum_", "eval/", "time/", "wall_s", "reward", "zero_var_frac", "gen_reward_var")
_warned: set[str] = set()


def reset_warnings() -> None:
    """Forget which warnings were given (the CLI calls this at the start of each command)."""
    _warned.clear()


def warn(message: str) -> None:
    """One warning line on stderr (each distinct message once per process)."""
    if message not in _warned:
        _warned.add(message)
        print(f"warning: {message}", file=sys.stderr, flush=True)


MAX_STEP = 10**9  # far past any real run; a larger step is a damaged or edited row
_MAX_INT = 2**1023  # an int past this does not convert to float (OverflowError in report)


def is_number(value: Any) -> bool:
    """An int or float (not a bool) that converts to float: an int of 10**400 does not."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    return not isinstance(value, int) or abs(value) < _MAX_INT


def metrics_rows(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """The usable rows of a metrics file, in file order (warnings for everything dropped)."""
    rows, problems = read_jsonl_lenient(path)
    for problem in problems:
        if not problem.endswith("torn last line"):  # a crash mid-append: expected, cut later
            warn(f"{problem}; skipped")
    clean = []
    for number, row in enumerate(rows, start=1):
        step = row.get("step")
        if not (is_number(step) and 0 <= step <= MAX_STEP and float(step).is_integer()):
            warn(f"{path}: row {number}: step is {step!r}, not a step number; row skipped")
            continue
        out = {}
        for key, value in row.items():
            numeric = key.startswith(_NUMERIC)
            if numeric and value is not None and not is_number(value):
                warn(
                    f"{path}: row {number} (step {step}): {key} is {value!r}, not a number; ignored"
                )
                continue
            out[key] = value
        out["step"] = int(step)
        clean.append(out)
    return clean


def manifest_from_folders(run_dir: str | os.PathLike[str]) -> dict[str, Any]:
    """A manifest rebuilt from ``spec.yaml`` and ``jobs/*/config.yaml`` (plan entries have id,
    type, allocator, seed, depends_on; resources and expectations are unknown)."""
    import yaml

    run = RunFolder(run_dir)
    try:
        spec = yaml.safe_load(run.spec.read_text("utf-8")) or {}
    except (OSError, yaml.YAMLError) as error:
        spec = {}
        warn(f"{run.spec}: unreadable ({str(error).splitlines()[0]}); no spec")
    jobs = []
    for config_path in sorted(Path(run.jobs).glob("*/config.yaml")):
        try:
            config = yaml.safe_load(config_path.read_text("utf-8")) or {}
            job = dict(config["job"])
        except (OSError, yaml.YAMLError, KeyError, TypeError, ValueError):
            warn(f"{config_path}: unreadable job config; job left out")
            continue
        depends = [job["train_job"]] if job.get("train_job") else []
        if job.get("type") == "report":
            depends = job.get("depends_on") or []
        jobs.append({
            "id": str(job.get("id", config_path.parent.name)),
            "type": str(job.get("type", "train")),
            "allocator": job.get("allocator"),
            "seed": job.get("seed"),
            "depends_on": list(depends),
            "resources": {},
        })  # fmt: skip
    order = {"train": 0, "eval": 1, "report": 2}
    jobs.sort(key=lambda j: (order.get(j["type"], 3), str(j["allocator"]), str(j["seed"])))
    return {
        "experiment": spec.get("name") if isinstance(spec, dict) else None,
        "spec": spec if isinstance(spec, dict) else {},
        "plan": {"jobs": jobs},
        "rebuilt": True,
    }
