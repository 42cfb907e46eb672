"""Cross-field rules of the components, asked of the components themselves.

The spec knows which sections a spec has; what is valid inside one is for the component that
owns it. After the models validate, :func:`component_problems` asks, in order:

- each **allocator** whether it runs with this budget on this backend: it is created with the
  spec's per-step budget and the backend's pool size, so its own rules run (group sizes divide
  the budget, ...); one that needs the true success probabilities needs a backend whose config
  says it knows them (``knows_success_probabilities``); its batch must fit the pool;
- each **component config** that defines ``check(*, budget, backend)`` (allocator configs,
  the backend config; a plug-in's own rules) — it raises ``ValueError`` naming its knob;
- the **eval** section (:meth:`EvalSpec.check`): benchmarks of the eval registry, samples of
  benchmarks in the suite, ``eval.jobs`` only where the backend runs eval jobs
  (``runs_eval_jobs``).

Each problem is a spec path and a message; :mod:`rollcli.spec.validate` turns the first into
one ``file:line:col: field: message`` line.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rollcli.spec.diagnose import knob_in
from rollcli.spec.yamlio import Marks, Path_

__all__ = ["LARGE_POOL", "Problem", "component_problems"]

Problem = tuple[Path_, str]
# the pool assumed for a backend whose config does not say (verl: known only once data loads)
LARGE_POOL = 100_000


def _dummy_oracle(prompt_ids: Any) -> Any:
    """Stands in for a backend's true probabilities while an oracle's budget is checked."""
    import numpy as np

    return np.full(len(prompt_ids), 0.5)


def _own_check(config: Any, path: Path_, data: dict[str, Any], **context: Any) -> list[Problem]:
    """A component config's own ``check(**context)``, if it defines one."""
    check: Callable[..., Any] | None = getattr(config, "check", None)
    if check is None:
        return []
    try:
        check(**context)
    except ValueError as error:
        return [(knob_in(str(error), path, data), str(error))]
    return []


def _allocator_problems(
    name: str, config: Any, spec: Any, data: dict[str, Any], marks: Marks
) -> list[Problem]:
    from rollcli.allocators.api import AllocatorError
    from rollcli.allocators.registry import ALLOCATORS, create_allocator

    path: Path_ = ("allocators", name)
    backend, rps = spec.backend, spec.budget.rollouts_per_step
    oracle = None
    if getattr(ALLOCATORS[config.kind][1], "requires_oracle", False):
        if not getattr(backend, "knows_success_probabilities", False):
            from rollcli.spec.models import backend_config_classes

            knowing = [
                kind
                for kind, cls in backend_config_classes().items()
                if getattr(cls, "knows_success_probabilities", False)
            ]
            return [
                (
                    (*path, "kind"),
                    f"allocator kind '{config.kind}' needs the true success probabilities, which "
                    f"only the {', '.join(knowing)} backend knows (backend is '{backend.kind}')",
                )
            ]
        oracle = _dummy_oracle
    pool = getattr(backend, "num_train_prompts", None)
    try:
        allocator = create_allocator(
            config, num_prompts=pool or LARGE_POOL, rollouts_per_step=rps, seed=0, oracle=oracle
        )
    except (ValueError, AllocatorError) as error:
        where = marks.find(("budget", "rollouts_per_step"))
        return [
            (
                knob_in(str(error), path, data, marks),
                f"{error} (budget.rollouts_per_step={rps} at {where}); change the budget or the "
                "allocator's group sizes",
            )
        ]
    batch = getattr(allocator, "batch_prompts", None)
    if isinstance(batch, int) and isinstance(pool, int) and batch > pool:
        # every allocator would train on fewer prompts than the budget pays for (uniform
        # silently, Pilot-Commit by failing): one rule for all, refused here
        return [
            (
                ("budget", "rollouts_per_step"),
                f"allocator '{name}' trains {batch} prompts per step at {rps} rollouts, more "
                f"than the pool's {pool} (backend.num_train_prompts); lower the budget or grow "
                "the pool",
            )
        ]
    return _own_check(config, path, data, budget=spec.budget, backend=backend)


def component_problems(spec: Any, data: dict[str, Any], marks: Marks) -> list[Problem]:
    """Every component's problems with this spec (see the module docstring)."""
    problems: list[Problem] = []
    for name, config in spec.allocators.items():
        problems += _allocator_problems(name, config, spec, data, marks)
    problems += _own_check(
        spec.backend, ("backend",), data, budget=spec.budget, backend=spec.backend
    )
    problems += [
        (("eval", *sub), message) for sub, message in spec.eval.check(backend=spec.backend)
    ]
    return problems
