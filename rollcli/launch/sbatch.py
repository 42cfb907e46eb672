"""Pure functions from planned jobs to Slurm job arrays and the exact sbatch scripts submitit writes.

The Slurm executor and ``rollcli plan`` share these functions, so the script a user reads in the
plan is the script that is submitted. Jobs are grouped into arrays by *wave* (a job's depth in the
dependency graph: train jobs first, then the eval jobs that follow them) and by resource shape;
each group is cut into chunks of at most the cluster's ``MaxArraySize`` tasks (array indices run
from 0 to n-1 and must stay below it), and the spec's ``array_parallelism`` is shared among the
chunks of one wave so that it bounds the experiment's running tasks. The text of a script comes
from submitit's own renderer (``submitit.slurm.slurm._make_sbatch_string``) with the parameters
computed here; the only symbolic part of a planned script is the ``--dependency`` line, whose
Slurm job ids exist only after submission (rendered as ``afterany:<array name>``).
"""

from __future__ import annotations

import math
import re
import shlex
import string
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rollcli.launch.api import Job, Resources
from rollcli.launch.slurm_queries import DEFAULT_MAX_ARRAY_SIZE, read_max_array_size

__all__ = [
    "DEFAULT_MAX_ARRAY_SIZE",
    "DEFAULT_TIME",
    "ArrayGroup",
    "group_into_arrays",
    "job_waves",
    "parse_sbatch_extra",
    "parse_time_minutes",
    "render_plan_scripts",
    "render_run_scripts",
    "render_sbatch",
    "render_setup",
    "submitit_folder",
    "submitit_parameters",
    "submitit_command",
]

DEFAULT_TIME = "24:00:00"  # used when the spec gives no time (submitit's own default is 5 min)

_TIME = re.compile(r"^(?:(\d+)-)?(\d+)(?::(\d+))?(?::(\d+))?$")


@dataclass(frozen=True)
class ArrayGroup:
    """One Slurm submission: jobs of one wave and one resource shape (one array when > 1 job)."""

    name: str  # e.g. "train-0" (wave type + index), used for dependency placeholders
    wave: int
    jobs: tuple[Job, ...]
    resources: Resources
    parallelism: int
    depends_on_groups: tuple[str, ...] = ()  # names of the groups holding this group's deps

    @property
    def size(self) -> int:
        return len(self.jobs)


def parse_time_minutes(value: str | None) -> int:
    """Slurm time syntax (``MM``, ``MM:SS``, ``HH:MM:SS``, ``D-HH``, ``D-HH:MM``, ``D-HH:MM:SS``)
    to whole minutes, rounded up; ``None`` gives :data:`DEFAULT_TIME`."""
    text = DEFAULT_TIME if value is None else str(value).strip()
    match = _TIME.match(text)
    if not match:
        raise ValueError(
            f"launch.time: '{value}' is not a Slurm time (e.g. '48:00:00', '2-00:00:00')"
        )
    days, a, b, c = match.groups()
    nums = [int(x) for x in (a, b, c) if x is not None]
    if days is not None:  # D-HH[:MM[:SS]]
        hours, minutes, seconds = (nums + [0, 0])[:3]
        total_s = ((int(days) * 24 + hours) * 60 + minutes) * 60 + seconds
    elif len(nums) == 1:  # MM
        total_s = nums[0] * 60
    elif len(nums) == 2:  # MM:SS
        total_s = nums[0] * 60 + nums[1]
    else:  # HH:MM:SS
        total_s = (nums[0] * 60 + nums[1]) * 60 + nums[2]
    minutes_total = math.ceil(total_s / 60)
    if minutes_total < 1:
        raise ValueError(f"launch.time: '{value}' is shorter than a minute")
    return minutes_total


def parse_sbatch_extra(lines: Sequence[str]) -> dict[str, Any]:
    """``["--exclusive", "#SBATCH --reservation=r1", "--mail-type END"]`` -> submitit's
    ``additional_parameters`` (``{"exclusive": True, "reservation": "r1", ...}``)."""
    params: dict[str, Any] = {}
    for raw in lines:
        line = raw.strip()
        if line.startswith("#SBATCH"):
            line = line[len("#SBATCH") :].strip()
        if not line.startswith("--"):
            raise ValueError(
                f"launch.sbatch_extra: '{raw}' must be a long sbatch option such as '--exclusive' "
                "or '--reservation=name'"
            )
        body = line[2:]
        if "=" in body:
            key, value = body.split("=", 1)
        elif " " in body:
            key, value = body.split(None, 1)
        else:
            key, value = body, True
        key = key.strip()
        if not re.fullmatch(r"[a-z][a-z0-9-]*", key):
            raise ValueError(f"launch.sbatch_extra: bad option name '--{key}' in '{raw}'")
        params[key] = value.strip() if isinstance(value, str) else value
    return params


def job_waves(jobs: Sequence[Job]) -> dict[str, int]:
    """Depth of each job in the dependency graph restricted to ``jobs`` (deps outside: ignored)."""
    by_id = {job.id: job for job in jobs}
    depth: dict[str, int] = {}

    def visit(job_id: str, trail: tuple[str, ...]) -> int:
        if job_id in depth:
            return depth[job_id]
        if job_id in trail:
            raise ValueError(f"dependency cycle through job {job_id}")
        deps = [d for d in by_id[job_id].depends_on if d in by_id]
        depth[job_id] = 1 + max((visit(d, (*trail, job_id)) for d in deps), default=-1)
        return depth[job_id]

    for job in jobs:
        visit(job.id, ())
    return depth


def _share(total: int, parts: int) -> list[int]:
    """Split ``total`` into ``parts`` near-equal positive integers (each at least 1)."""
    base, extra = divmod(total, parts)
    return [max(1, base + (1 if i < extra else 0)) for i in range(parts)]


def group_into_arrays(
    jobs: Sequence[Job],
    *,
    max_array_size: int = DEFAULT_MAX_ARRAY_SIZE,
    array_parallelism: int | None = None,
) -> list[ArrayGroup]:
    """Group ``jobs`` into submissions by (wave, resources), chunked to at most ``max_array_size``
    tasks, in a deterministic order (wave, then first appearance in ``jobs``)."""
    if max_array_size < 1:
        raise ValueError(f"MaxArraySize must be at least 1, got {max_array_size}")
    waves = job_waves(jobs)
    buckets: dict[tuple[int, str, Resources], list[Job]] = {}
    for job in jobs:
        buckets.setdefault((waves[job.id], job.type, job.resources), []).append(job)
    groups: list[ArrayGroup] = []
    group_of_job: dict[str, str] = {}
    for wave in sorted({w for w, _, _ in buckets}):
        shapes = [(res, js) for (w, _, res), js in buckets.items() if w == wave]
        chunks: list[tuple[Resources, list[Job]]] = []
        for res, wave_jobs in shapes:
            num_chunks = math.ceil(len(wave_jobs) / max_array_size)
            sizes = _share(len(wave_jobs), num_chunks)
            start = 0
            for size in sizes:
                chunks.append((res, wave_jobs[start : start + size]))
                start += size
        total_parallel = array_parallelism or sum(len(c) for _, c in chunks)
        shares = _share(max(total_parallel, len(chunks)), len(chunks))
        for (res, chunk), share in zip(chunks, shares, strict=True):
            kind = chunk[0].type
            name = f"{kind}-{sum(1 for g in groups if g.jobs[0].type == kind)}"
            deps = sorted(
                {group_of_job[d] for job in chunk for d in job.depends_on if d in group_of_job}
            )
            groups.append(
                ArrayGroup(
                    name=name,
                    wave=wave,
                    jobs=tuple(chunk),
                    resources=res,
                    parallelism=min(share, len(chunk)),
                    depends_on_groups=tuple(deps),
                )
            )
            for job in chunk:
                group_of_job[job.id] = name
    return groups


def submitit_folder(run_dir: Path) -> Path:
    """Where submitit keeps the scripts, pickles and stdout/stderr of a run's Slurm jobs."""
    return Path(run_dir) / "slurm"


def _template(name: str) -> string.Template:
    from rollcli.templates import read_sbatch_template

    return string.Template(read_sbatch_template(name))


def render_setup(run_dir: Path, resources: Resources) -> list[str]:
    """The ``# setup`` lines of a script (rollcli/templates/sbatch/setup.sh, plus multinode.sh when
    ``nodes > 1``), with the run folder shell-quoted."""
    values = {"run_dir": shlex.quote(str(run_dir)), "nodes": str(resources.nodes)}
    text = _template("setup.sh").substitute(values)
    if resources.nodes > 1:
        text += _template("multinode.sh").substitute(values)
    return [line for line in text.splitlines() if line.strip() and not line.startswith("#")]


def submitit_parameters(
    group: ArrayGroup,
    *,
    run_dir: Path,
    experiment: str,
    dependency: str | None = None,
    signal_delay_s: int = 90,
) -> dict[str, Any]:
    """The ``SlurmExecutor.update_parameters`` of one group: resources, array parallelism,
    requeue, the setup block and the dependency line."""
    res = group.resources
    extra = parse_sbatch_extra(res.sbatch_extra)
    if res.mem is not None:
        extra.setdefault("mem", res.mem)
    extra.setdefault("requeue" if res.requeue else "no-requeue", True)
    job_type = group.jobs[0].type if group.jobs else "job"
    params: dict[str, Any] = {
        "job_name": f"rollcli-{experiment}-{job_type}",
        "time": parse_time_minutes(res.time),
        "nodes": res.nodes,
        "ntasks_per_node": 1,  # one task per node: the ray bootstrap decides head/worker by rank
        "cpus_per_task": res.cpus_per_task,
        "signal_delay_s": signal_delay_s,
        "array_parallelism": group.parallelism,
        "setup": render_setup(run_dir, res),
        "additional_parameters": extra,
    }
    if res.gpus_per_node:
        params["gpus_per_node"] = res.gpus_per_node
    for key in ("partition", "account", "qos", "constraint"):
        value = getattr(res, key)
        if value:
            params[key] = value
    if dependency:
        params["dependency"] = dependency
    return params


def submitit_command(run_dir: Path, python: str | None = None) -> str:
    """The command line submitit puts in the script (see ``SlurmExecutor._submitit_command_str``);
    ``python`` is the interpreter's path (default: this one), quoted here."""
    python = shlex.quote(python or sys.executable)
    return " ".join(
        [python, "-u -m submitit.core._submit", shlex.quote(str(submitit_folder(run_dir)))]
    )


def render_sbatch(
    group: ArrayGroup,
    *,
    run_dir: Path,
    experiment: str,
    python: str | None = None,
    dependency_ids: Mapping[str, str] | None = None,
    signal_delay_s: int = 90,
) -> str:
    """The exact sbatch script submitit submits for ``group``. ``dependency_ids`` maps group
    names to Slurm job ids; without it the dependency names the groups (``afterany:train-0``)."""
    from submitit.slurm.slurm import _make_sbatch_string

    run_dir = Path(run_dir).absolute()  # submitit makes its folder absolute
    dependency = None
    if group.depends_on_groups:
        ids = [(dependency_ids or {}).get(name, name) for name in group.depends_on_groups]
        dependency = "afterany:" + ":".join(ids)
    params = submitit_parameters(
        group,
        run_dir=run_dir,
        experiment=experiment,
        dependency=dependency,
        signal_delay_s=signal_delay_s,
    )
    return _make_sbatch_string(
        command=submitit_command(run_dir, python),
        folder=submitit_folder(run_dir),
        map_count=group.size if group.size > 1 else None,
        **params,
    )


def render_plan_scripts(
    jobs: Sequence[Job],
    *,
    run_dir: Path,
    experiment: str,
    max_array_size: int = DEFAULT_MAX_ARRAY_SIZE,
    array_parallelism: int | None = None,
    python: str | None = None,
    signal_delay_s: int = 90,
) -> list[tuple[ArrayGroup, str]]:
    """Every submission of a plan and its sbatch script, in submission order (``rollcli plan``)."""
    groups = group_into_arrays(
        jobs, max_array_size=max_array_size, array_parallelism=array_parallelism
    )
    return [
        (
            group,
            render_sbatch(
                group,
                run_dir=run_dir,
                experiment=experiment,
                python=python,
                signal_delay_s=signal_delay_s,
            ),
        )
        for group in groups
    ]


def render_run_scripts(
    plan: Any, run_dir: Path, launch: Mapping[str, Any]
) -> list[tuple[str, str]]:
    """``(title, script)`` for every submission of a built plan, as ``rollcli plan --sbatch``
    shows them; ``MaxArraySize`` is read from the cluster when ``scontrol`` answers."""
    from rollcli.launch.orchestrate import plan_jobs
    from rollcli.launch.preemption import measured_step_seconds, signal_lead_s

    jobs = plan_jobs(plan, Path(run_dir))
    step_s, _ = measured_step_seconds(Path(run_dir))
    lead = signal_lead_s(launch, step_s, parse_time_minutes(launch.get("time")) * 60)
    max_size = read_max_array_size(timeout=5.0)
    scripts = render_plan_scripts(
        jobs,
        run_dir=Path(run_dir),
        experiment=Path(run_dir).name,
        max_array_size=max_size,
        array_parallelism=launch.get("array_parallelism"),
        signal_delay_s=lead,
    )
    return [
        (f"{group.name}: {group.size} job(s), at most {group.parallelism} at once", text)
        for group, text in scripts
    ]
