"""The typed, frozen spec: pydantic v2 models for every section of an experiment YAML.

The backend and allocator sections are discriminated unions on ``kind`` over the frozen config
dataclasses their packages own (``rollcli.backends.<kind>.config`` and the allocator registry),
so a knob is defined exactly once, next to the code that uses it. Those unions are assembled at
first use by :func:`spec_model` (backends that are not importable are skipped; a test asserts
that sim, tiny and verl are all wired). Cross-field rules: the spec's own in
:mod:`rollcli.spec.validate`, the components' in :mod:`rollcli.spec.checks`.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
from typing import Annotated, Any, Literal, Union

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    create_model,
    field_validator,
    model_serializer,
)

from rollcli.errors import suggest

__all__ = [
    "BACKEND_CONFIGS",
    "BudgetSpec",
    "CheckpointSpec",
    "EvalSpec",
    "LiveCodeBenchSpec",
    "LaunchSpec",
    "SpecBase",
    "TargetSpec",
    "TrackingSpec",
    "WandbSpec",
    "allocator_config_classes",
    "backend_config_classes",
    "late_knob_defaults",
    "omit_late_knobs",
    "spec_model",
]

# backend kind -> "module:ConfigClass" (each importable without torch/verl)
BACKEND_CONFIGS: dict[str, str] = {
    "sim": "rollcli.backends.sim.config:SimConfig",
    "tiny": "rollcli.backends.tiny.config:TinyConfig",
    "verl": "rollcli.backends.verl.config:VerlConfig",
}

NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_-]*$"
NAME_MAX = 100  # run folders and file names stay far below the 255-byte file-system limit
NonNegativeInt = Annotated[int, Field(ge=0)]


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class BudgetSpec(_Frozen):
    """The equal per-step budget every allocator gets."""

    steps: int = Field(gt=0, description="training steps")
    rollouts_per_step: int = Field(gt=0, description="rollouts generated per step")


class LiveCodeBenchSpec(_Frozen):
    """Where jobs read LiveCodeBench: a local copy of the official ``code_generation_lite``
    release (compute nodes are usually offline, and the release is not shipped with rollcli)."""

    path: str = Field(
        min_length=1,
        description="a release jsonl file or the folder of test.jsonl .. test6.jsonl (absolute, "
        "or relative to where rollcli runs)",
    )
    version: str = Field("v6", description="release_v1..release_v6, release_latest, vN or vN_vM")


class EvalSpec(_Frozen):
    """When and what to evaluate (the sim and tiny backends evaluate on their own held-out set)."""

    every: int = Field(5, ge=1, description="steps between evaluations (and at the last step)")
    suite: tuple[str, ...] = Field((), description="benchmarks (aime24, math500, ...)")
    samples: int | dict[str, Annotated[int, Field(ge=1)]] = Field(
        1, description="samples per problem, one number or per benchmark"
    )
    temperature: float = Field(1.0, ge=0)
    top_p: float = Field(1.0, gt=0, le=1)
    max_tokens: int | None = Field(None, ge=1)
    jobs: bool = Field(False, description="verl: evaluate checkpoints in separate eval jobs")
    limit: int | None = Field(
        None, ge=1, description="eval jobs: the first N problems of each benchmark (smoke runs)"
    )
    livecodebench: LiveCodeBenchSpec | None = Field(
        None, description="the local LiveCodeBench release (needed when the suite has it)"
    )

    def check(self, *, backend: Any) -> list[tuple[tuple[str | int, ...], str]]:
        """Problems of this section with the backend, as (path inside ``eval``, message): names
        the eval benchmark registry does not know, repeated benchmarks, samples of benchmarks
        outside the suite, ``jobs`` with a backend that runs no eval jobs, livecodebench without
        its local release (or a release given without it in the suite, or an unknown version)."""
        problems: list[tuple[tuple[str | int, ...], str]] = []
        problems += self._livecodebench_problems()
        if self.suite:
            from rollcli.eval.benchmarks import BENCHMARKS

            known = list(BENCHMARKS)
            for index, bench in enumerate(self.suite):
                if bench not in known:
                    problems.append(
                        (
                            ("suite", index),
                            f"unknown benchmark '{bench}'{suggest(bench, known)} "
                            f"(valid: {', '.join(known)})",
                        )
                    )
                elif self.suite.index(bench) != index:
                    problems.append((("suite", index), f"benchmark '{bench}' is listed twice"))
        if isinstance(self.samples, dict):
            for bench in self.samples:
                if bench not in self.suite:
                    problems.append(
                        (
                            ("samples", bench),
                            f"'{bench}' is not in eval.suite ({', '.join(self.suite) or 'empty'})",
                        )
                    )
        if self.jobs and not getattr(backend, "runs_eval_jobs", False):
            runners = [
                kind
                for kind, cls in backend_config_classes().items()
                if getattr(cls, "runs_eval_jobs", False)
            ]
            problems.append(
                (
                    ("jobs",),
                    f"separate eval jobs are for the {', '.join(runners)} backend, not "
                    f"'{backend.kind}'",
                )
            )
        return problems

    def _livecodebench_problems(self) -> list[tuple[tuple[str | int, ...], str]]:
        if "livecodebench" in self.suite and self.livecodebench is None:
            return [
                (
                    ("suite", self.suite.index("livecodebench")),
                    "livecodebench is read from a local copy of its official release: set "
                    "eval.livecodebench.path to the code_generation_lite jsonl file or folder "
                    "(and eval.livecodebench.version, default v6)",
                )
            ]
        if self.livecodebench is None:
            return []
        if "livecodebench" not in self.suite:
            return [(("livecodebench",), "is set but livecodebench is not in eval.suite")]
        from rollcli.eval.benchmarks.base import BenchmarkError
        from rollcli.eval.benchmarks.livecodebench import release_files

        try:
            release_files(self.livecodebench.version)
        except BenchmarkError as error:
            return [(("livecodebench", "version"), str(error))]
        return []

    @model_serializer(mode="wrap")
    def _omit_unset_limit(self, handler: Any) -> dict[str, Any]:
        # unset knobs stay out of the dumped spec, so job ids of existing specs do not change
        data = handler(self)
        if isinstance(data, dict):
            for key in ("limit", "livecodebench"):
                if data.get(key) is None:
                    data.pop(key, None)
        return data


class TargetSpec(_Frozen):
    """How rollouts-to-target is defined: the baseline's final/peak accuracy, a fixed value, or
    a fraction of the baseline's rise from its first to its final accuracy (``at: rise``)."""

    baseline: str | None = Field(None, description="allocator name (default: first uniform one)")
    metric: str = Field("accuracy", min_length=1, description="an eval/<metric> key")
    at: Literal["final", "peak", "value", "rise"] = "final"
    value: float | None = Field(
        None, description="at: value: the metric's value; at: rise: the fraction in (0, 1]"
    )
    smooth: int = Field(1, ge=1, description="moving-average window over evaluations")


class LaunchSpec(_Frozen):
    """Where jobs run. Resource fields apply to each train job on Slurm."""

    executor: Literal["local", "slurm"] = "local"
    max_parallel: int | None = Field(None, ge=1, description="local: concurrent jobs (cores)")
    nodes: int = Field(1, ge=1)
    gpus_per_node: int = Field(0, ge=0)
    cpus_per_task: int = Field(1, ge=1)
    mem: str | None = Field(None, pattern=r"^\d+[KMGT]?B?$", description='e.g. "64G"')
    memory_limit: str | None = Field(
        None,
        pattern=r"^\d+[KMGT]?B?$",
        description='address-space cap of each train/eval job, e.g. "48G" ("0": none; '
        "default: 80% of the machine's memory; not applied on CUDA)",
    )
    time: str | None = Field(
        None,
        pattern=r"^(\d+-)?\d+(:\d{2}){0,2}$",
        description='Slurm time limit, e.g. "48:00:00" or "2-00:00:00"',
    )
    partition: str | None = None
    cpu_partition: str | None = Field(
        None, description="Slurm partition for the jobs that need no GPU (the report job)"
    )
    account: str | None = None
    qos: str | None = None
    constraint: str | None = None
    sbatch_extra: tuple[str, ...] = Field((), description="extra '#SBATCH' lines, e.g. --exclusive")
    array_parallelism: int | None = Field(None, ge=1)
    requeue: bool = True
    max_requeues: int = Field(
        3, ge=0, description="Slurm: requeues after a time limit before the job ends (submitit)"
    )
    signal_lead_s: int | None = Field(
        None,
        ge=30,
        le=65535,
        description="Slurm: USR2 warning before the time limit, in seconds (default: one "
        "measured step + checkpoint time, at least 90)",
    )

    @model_serializer(mode="wrap")
    def _omit_defaults_of_late_knobs(self, handler: Any) -> dict[str, Any]:
        # knobs added later stay out of dumped specs at their defaults (manifests, goldens); one
        # serializer for all of them: pydantic keeps only the last model_serializer of a class
        data = handler(self)
        if isinstance(data, dict):
            if data.get("max_requeues") == 3:
                data.pop("max_requeues")
            if data.get("signal_lead_s") is None:
                data.pop("signal_lead_s", None)
            if data.get("memory_limit") is None:
                data.pop("memory_limit", None)
        return data

    @field_validator(
        "partition", "cpu_partition", "account", "qos", "constraint", "sbatch_extra", mode="after"
    )
    @classmethod
    def _no_control_characters(cls, value: Any) -> Any:
        # these reach an sbatch script's #SBATCH lines: a newline would start a shell line
        for text in value if isinstance(value, tuple) else [value]:
            if isinstance(text, str) and any(ord(c) < 32 or ord(c) == 127 for c in text):
                raise ValueError(
                    f"{text!r} holds a control character (newline, tab, ...), which would break "
                    "the sbatch script"
                )
        return value


class WandbSpec(_Frozen):
    project: str = "rollcli"
    entity: str | None = None
    mode: Literal["auto", "online", "offline", "disabled"] = Field(
        "auto",
        description="auto: online with a W&B login and a reachable host, else nothing logged",
    )
    tags: tuple[str, ...] = ()
    group: str | None = None


class TrackingSpec(_Frozen):
    wandb: WandbSpec = WandbSpec()


class CheckpointSpec(_Frozen):
    every: int = Field(1, ge=1, description="steps between checkpoints")
    keep: int = Field(2, ge=1, description="checkpoints kept per job (newest)")


class SpecBase(_Frozen):
    """Methods shared by the assembled ``Spec`` model (see :func:`spec_model`)."""

    def to_dict(self) -> dict[str, Any]:
        """The resolved spec as plain JSON-able data, sections in the documented order."""
        data = self.model_dump(mode="json")
        if isinstance(data.get("backend"), dict):
            data["backend"] = omit_late_knobs(type(self.backend), data["backend"])  # type: ignore[attr-defined]
        if isinstance(data.get("allocators"), dict):
            data["allocators"] = {
                name: omit_late_knobs(type(self.allocators[name]), config)  # type: ignore[attr-defined]
                for name, config in data["allocators"].items()
            }
        if data.get("base_seeds") is None:  # absent unless set: job ids and dumps stay as before
            data.pop("base_seeds", None)
        return {key: data[key] for key in SECTION_ORDER if key in data}

    def allocator_dict(self, name: str) -> dict[str, Any]:
        return dataclasses.asdict(self.allocators[name])  # type: ignore[attr-defined]

    def backend_dict(self) -> dict[str, Any]:
        config = _plain(dataclasses.asdict(self.backend))  # type: ignore[attr-defined]
        return omit_late_knobs(type(self.backend), config)  # type: ignore[attr-defined]


def late_knob_defaults(config_class: type) -> dict[str, Any]:
    """The knobs a backend or allocator config declares in its ``LATE_KNOBS`` class attribute
    (added after specs were written), with their field defaults.

    Every component declares them the same way: ``LATE_KNOBS: ClassVar[tuple[str, ...]]``, each
    name a field of the config dataclass with a plain default. A dumped spec and a job config
    leave such a knob out while it holds that default (:func:`omit_late_knobs`), so the job ids
    of specs written before the knob existed do not change.
    """
    names = getattr(config_class, "LATE_KNOBS", ())
    fields = {f.name: f for f in dataclasses.fields(config_class)}
    defaults = {}
    for name in names:
        field = fields.get(name)
        if field is None or field.default is dataclasses.MISSING:
            raise TypeError(
                f"{config_class.__name__}.LATE_KNOBS names {name!r}, which is not a field "
                "with a plain default"
            )
        defaults[name] = field.default
    return defaults


def omit_late_knobs(config_class: type, config: dict[str, Any]) -> dict[str, Any]:
    """``config`` (a dumped ``config_class``) without its late knobs that hold their defaults."""
    late = late_knob_defaults(config_class)
    return {key: value for key, value in config.items() if key not in late or value != late[key]}


SECTION_ORDER = (
    "name",
    "description",
    "backend",
    "budget",
    "allocators",
    "seeds",
    "base_seeds",
    "eval",
    "target",
    "launch",
    "tracking",
    "checkpoint",
)


def _plain(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def backend_config_classes() -> dict[str, type]:
    """Backend kind -> config dataclass, for every backend whose config module imports."""
    classes = {}
    for kind, target in BACKEND_CONFIGS.items():
        module_name, class_name = target.split(":")
        try:
            classes[kind] = getattr(importlib.import_module(module_name), class_name)
        except (ImportError, AttributeError):
            continue
    return classes


def allocator_config_classes() -> dict[str, type]:
    """Allocator kind -> config dataclass, from the allocator registry (plug-ins included)."""
    from rollcli.allocators.registry import CONFIGS

    return {kind: CONFIGS[kind] for kind in sorted(CONFIGS)}


def _union(classes: dict[str, type]) -> Any:
    members = tuple(classes.values())
    return Annotated[Union[members], Field(discriminator="kind")]  # noqa: UP007


def spec_model() -> type[SpecBase]:
    """The ``Spec`` model with the backend and allocator unions of the installed packages.

    Built once per set of config classes: an allocator kind registered after the first build
    (a plug-in, or ``register_allocator`` in a script) gets a model that accepts it.
    """
    return _spec_model(
        tuple(backend_config_classes().items()), tuple(allocator_config_classes().items())
    )


@functools.lru_cache(maxsize=8)
def _spec_model(
    backends: tuple[tuple[str, type], ...], allocators: tuple[tuple[str, type], ...]
) -> type[SpecBase]:
    backend = _union(dict(backends))
    allocator = _union(dict(allocators))
    return create_model(  # type: ignore[call-overload,no-any-return]
        "Spec",
        __base__=SpecBase,
        __doc__="A rollcli experiment: what to train, which allocators to compare, where to run.",
        name=(
            str,
            Field(
                pattern=NAME_PATTERN,
                max_length=NAME_MAX,
                description="experiment name (run folder name)",
            ),
        ),
        description=(str, ""),
        backend=(backend, Field(description="what generates rollouts and learns")),
        budget=(BudgetSpec, ...),
        allocators=(
            dict[Annotated[str, Field(pattern=NAME_PATTERN, max_length=NAME_MAX)], allocator],
            Field(min_length=1, description="name -> allocator config"),
        ),
        seeds=(tuple[NonNegativeInt, ...], Field((0,), min_length=1)),
        base_seeds=(
            tuple[NonNegativeInt, ...] | None,
            Field(
                None,
                min_length=1,
                description="base models to repeat every seed on (tiny: backend.base_seed); the "
                "report then resamples base models, then seeds within each",
            ),
        ),
        eval=(EvalSpec, EvalSpec()),
        target=(TargetSpec, TargetSpec()),
        launch=(LaunchSpec, LaunchSpec()),
        tracking=(TrackingSpec, TrackingSpec()),
        checkpoint=(CheckpointSpec, CheckpointSpec()),
    )
