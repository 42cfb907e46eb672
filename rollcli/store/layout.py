"""The run folder (``runs/<experiment>/``): manifest, resolved spec and one folder per job.

::

    manifest.json   {experiment, spec, plan: {jobs: [...]}, git_commit, packages, command, created}
    spec.yaml       the resolved spec
    .lock           held by the orchestrating ``rollcli run``
    jobs/<id>/      config.yaml  state.json  metrics.jsonl  checkpoints/  eval/  logs/

File names come from :mod:`rollcli.store.folders`. Everything is written atomically
(``rollcli.store.atomic``). Preparing a run is idempotent: a rerun keeps finished jobs, their
metrics and checkpoints, and adds the jobs that are new.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

import yaml

from rollcli.errors import StoreError, suggest
from rollcli.store.atomic import atomic_write_json, atomic_write_text, read_json
from rollcli.store.folders import RunFolder
from rollcli.store.state import init_state, now, read_state

__all__ = [
    "job_dir",
    "prepare_run",
    "load_manifest",
    "find_job",
    "git_commit",
    "package_versions",
    "dump_yaml",
]

PACKAGES = (
    "rollcli",
    "numpy",
    "torch",
    "pydantic",
    "omegaconf",
    "hydra-core",
    "typer",
    "submitit",
    "wandb",
    "verl",
    "vllm",
    "transformers",
    "math-verify",
)


def dump_yaml(data: Any) -> str:
    return yaml.safe_dump(data, sort_keys=False, default_flow_style=False, allow_unicode=True)


def job_dir(run_dir: str | os.PathLike[str], job_id: str) -> Path:
    """The folder of job ``job_id`` of the run (``RunFolder(run_dir).job(job_id).path``)."""
    return RunFolder(run_dir).job(job_id).path


def git_commit() -> str | None:
    """The commit of the rollcli source tree (``+dirty`` if modified), or None outside git."""
    root = Path(__file__).resolve().parents[2]
    try:
        commit = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            timeout=5,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            timeout=5,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return commit + ("+dirty" if dirty else "")


def package_versions() -> dict[str, str]:
    versions = {"python": sys.version.split()[0]}
    for name in PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return versions


def prepare_run(
    run_dir: str | os.PathLike[str],
    spec: dict[str, Any],
    plan: Any,
    command: Sequence[str] | str | None = None,
) -> Path:
    """Write the manifest, the resolved spec and every job's folder, config and initial state.

    A job folder that exists keeps its state, metrics and checkpoints; its config is rewritten
    only where it differs in fields that do not enter the job id (tracking, checkpoint).
    """
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    run = RunFolder(run_dir)
    previous = run.manifest
    created = now()
    if previous.exists():
        try:
            old = read_json(previous)
        except ValueError:
            old = {}
        if old.get("experiment") not in (None, spec["name"]):
            raise StoreError(
                f"{run_dir} holds experiment '{old['experiment']}', not '{spec['name']}'; "
                "choose another --runs-dir or rename the spec"
            )
        created = old.get("created", created)
    if command is None:
        command = sys.argv
    manifest = {
        "experiment": spec["name"],
        "spec": spec,
        "plan": plan.to_manifest(),
        "git_commit": git_commit(),
        "packages": package_versions(),
        "command": command if isinstance(command, str) else " ".join(command),
        "created": created,
        "updated": now(),
    }
    for job in plan:
        folder = run.job(job.id).make()
        text = dump_yaml(job.config)
        stale = not folder.config.exists() or folder.config.read_text("utf-8") != text
        if stale and read_state(folder.path)["status"] != "running":
            atomic_write_text(folder.config, text)
        init_state(folder.path)
    atomic_write_text(run.spec, dump_yaml(spec))
    atomic_write_json(run.manifest, manifest)
    return run_dir


def load_manifest(run_dir: str | os.PathLike[str]) -> dict[str, Any]:
    path = RunFolder(run_dir).manifest
    if not path.exists():
        if not Path(run_dir).exists():
            nearby = Path("runs") / run_dir
            if not Path(run_dir).is_absolute() and RunFolder(nearby).manifest.exists():
                raise StoreError(f"{run_dir}: no such run folder; did you mean {nearby}?")
            raise StoreError(f"{run_dir}: no such run folder; start one with: rollcli run SPEC")
        raise StoreError(
            f"{run_dir}: not a run folder (no {path.name}); give runs/<experiment>, "
            "or start one with: rollcli run SPEC"
        )
    try:
        manifest = read_json(path)
        if not isinstance(manifest, dict) or not isinstance(manifest.get("plan"), dict):
            raise ValueError("not a manifest object")
    except (ValueError, OSError) as error:
        from rollcli.store.damaged import manifest_from_folders, warn

        where = f"{path}:{error.lineno}" if isinstance(error, json.JSONDecodeError) else str(path)
        warn(f"{where}: manifest unreadable ({str(error).split(':')[0]}); rebuilt from "
             f"{RunFolder(run_dir).spec.name} and the job folders")  # fmt: skip
        manifest = manifest_from_folders(run_dir)
    return manifest  # type: ignore[no-any-return]


def _seed_label(job: dict[str, Any]) -> str:
    """``0``, or ``b1/s0`` for seed 0 on base model 1 (a spec with ``base_seeds``)."""
    if job.get("base_seed") is None:
        return str(job["seed"])
    return f"b{job['base_seed']}/s{job['seed']}"


def find_job(manifest: dict[str, Any], query: str) -> str:
    """A job id from an id prefix (``3f2a``), ``<allocator>/<seed>`` (``pc/0``; ``pc/b1/s0`` on
    base model 1 when the spec lists ``base_seeds``), or ``report``."""
    jobs = manifest["plan"]["jobs"]
    ids = [job["id"] for job in jobs]
    if query in ids:
        return query
    if query == "report":
        matches = [j["id"] for j in jobs if j["type"] == "report"]
    elif "/" in query:
        name, _, seed = query.partition("/")
        matches = [
            j["id"]
            for j in jobs
            if j["type"] == "train" and j["allocator"] == name and _seed_label(j) == seed
        ]
    else:
        matches = [i for i in ids if i.startswith(query)]
    if len(matches) == 1:
        return matches[0]
    if matches:
        what = "give more characters"
        if "/" in query:  # a sweep runs several points of one allocator and seed
            what = "give one of these ids (a sweep runs several points per allocator and seed)"
        raise StoreError(f"job '{query}' is ambiguous: {', '.join(matches)}; {what}")
    names = [f"{j['allocator']}/{_seed_label(j)}" for j in jobs if j["type"] == "train"]
    hint = suggest(query, names + ids, sentence=True)
    raise StoreError(
        f"no job '{query}' in this run.{hint} Give an id prefix or allocator/seed "
        "(see: rollcli status RUNDIR)"
    )
