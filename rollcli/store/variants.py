"""One run folder per variant: a run whose spec differs from the one a run folder holds never
overwrites it (issue 16: ``rollcli run spec.yaml budget.steps=50`` took over ``runs/<name>``).

What makes a variant is what changes results: ``backend``, ``budget``, ``allocators``, ``seeds``,
``eval`` and ``target``. Where and how jobs run (``launch``, ``tracking``, ``checkpoint``,
``description``) does not: the same folder serves a spec run locally and then on Slurm. A variant
goes to ``<runs-dir>/<name>-<6 hex of those sections>``, with ``variant.json`` naming the folder
it differs from and how; the finished jobs it shares with that folder (same content-hashed ids)
are copied over, so they are not run again. ``rollcli status`` of a folder lists its variants.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path
from typing import Any

from rollcli.store.atomic import atomic_write_json, read_json
from rollcli.store.folders import RunFolder
from rollcli.store.state import read_state

__all__ = ["RESULT_KEYS", "Variant", "choose_run_dir", "list_variants", "spec_differences"]

RESULT_KEYS = ("backend", "budget", "allocators", "seeds", "eval", "target")


def _results(spec: dict[str, Any]) -> dict[str, Any]:
    return {k: spec.get(k) for k in RESULT_KEYS}


def spec_digest(spec: dict[str, Any]) -> str:
    """6 hex digits of the result sections (the variant folder's suffix)."""
    text = json.dumps(_results(spec), sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:6]


def spec_differences(old: Any, new: Any, path: str = "", limit: int = 4) -> list[str]:
    """``["budget.steps: 150 -> 50", ...]``: where two specs' result sections differ."""
    out: list[str] = []
    if path == "":
        old, new = _results(old), _results(new)
    if isinstance(old, dict) and isinstance(new, dict):
        for key in list(old) + [k for k in new if k not in old]:
            where = f"{path}.{key}" if path else str(key)
            if key not in new:
                out.append(f"{where}: removed")
            elif key not in old:
                out.append(f"{where}: added")
            elif old[key] != new[key]:
                out += spec_differences(old[key], new[key], where, limit)
    elif old != new:
        out.append(f"{path}: {json.dumps(old, default=str)} -> {json.dumps(new, default=str)}")
    return out[:limit] if path == "" else out


class Variant:
    """Where a run goes: ``run_dir``, and when it is a variant, of which folder and how."""

    def __init__(
        self, run_dir: Path, of: Path | None = None, differs: list[str] | None = None
    ) -> None:
        self.run_dir = run_dir
        self.of = of
        self.differs = differs or []
        self.reused: list[str] = []

    def describe(self) -> str | None:
        """The line ``rollcli run`` prints, or None when the run goes to its usual folder."""
        if self.of is None:
            return None
        reused = f"; {len(self.reused)} finished jobs copied from it" if self.reused else ""
        return (
            f"{self.of} holds another variant of this experiment ({'; '.join(self.differs)}): "
            f"this run goes to {self.run_dir}{reused}"
        )


def choose_run_dir(runs_dir: Path, spec: dict[str, Any], plan: Any) -> Variant:
    """The folder for ``spec``: ``runs_dir/<name>`` unless that holds a spec with other results,
    then its variant folder (made, with the finished jobs both share copied in)."""
    base = Path(runs_dir) / spec["name"]
    old = _held_spec(base)
    if old is None or _results(old) == _results(spec):
        return Variant(base)
    target = Path(runs_dir) / f"{spec['name']}-{spec_digest(spec)}"
    variant = Variant(target, base, spec_differences(old, spec))
    folder = RunFolder(target)
    target.mkdir(parents=True, exist_ok=True)
    if not folder.variant.exists():
        atomic_write_json(folder.variant, {"of": str(base), "differs": variant.differs})
    for job in plan:
        source, dest = RunFolder(base).job(job.id).path, folder.job(job.id).path
        if dest.exists() or not source.is_dir() or read_state(source)["status"] != "done":
            continue
        partial = dest.with_name(dest.name + ".copy")
        shutil.copytree(source, partial, dirs_exist_ok=True)
        partial.rename(dest)  # whole or not at all
        variant.reused.append(job.id)
    return variant


def list_variants(run_dir: Path) -> list[tuple[Path, list[str]]]:
    """The variant folders beside ``run_dir`` made from it: ``(folder, differences)``."""
    run_dir = Path(run_dir)
    out = []
    for candidate in sorted(run_dir.parent.glob(f"{run_dir.name}-*")):
        record = RunFolder(candidate).variant
        if not record.is_file():
            continue
        try:
            data = read_json(record)
        except ValueError:
            continue
        if Path(str(data.get("of", ""))).name == run_dir.name:
            out.append((candidate, list(data.get("differs") or [])))
    return out


def _held_spec(run_dir: Path) -> dict[str, Any] | None:
    path = RunFolder(run_dir).manifest
    if not path.is_file():
        return None
    try:
        spec = read_json(path).get("spec")
    except ValueError:
        return None  # a torn manifest is recovered by the run itself (store/damaged.py)
    return spec if isinstance(spec, dict) else None
