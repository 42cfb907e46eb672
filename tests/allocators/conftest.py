"""Helpers for the allocator tests: the epoch order a seed gives, scripted runs step by step,
and a registry that is put back as it was after a test that registers kinds."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from rollcli.allocators import BaseAllocator, PromptSource, create_allocator, registry
from rollcli.testing import ScriptedBackend

# an outside package, installed only into temporary venvs by test_plugin_venv.py
collect_ignore = ["plugin_pkg"]


@pytest.fixture
def clean_registry() -> Iterator[None]:
    """Restore the registry (kinds, entry-point scan, plug-in failures) after the test."""
    entries = dict(registry._ENTRIES)
    loaded = registry._ENTRY_POINTS_LOADED
    errors = dict(registry._PLUGIN_ERRORS)
    try:
        yield
    finally:
        registry._ENTRIES.clear()
        registry._ENTRIES.update(entries)
        registry._ENTRY_POINTS_LOADED = loaded
        registry._PLUGIN_ERRORS.clear()
        registry._PLUGIN_ERRORS.update(errors)


def epoch_order(num_prompts: int, seed: int, epoch: int = 0) -> list[int]:
    """The prompt order PromptSource hands out in ``epoch`` for ``seed`` (nothing deferred)."""
    source = PromptSource(num_prompts=num_prompts, seed=seed)
    for _ in range(epoch):
        source.new_epoch()
    return source.take(num_prompts, wrap=False)


def scripted_by_position(order: list[int], patterns: list[list[float]]) -> ScriptedBackend:
    """A scripted backend where the prompt at epoch-0 position i gets ``patterns[i]``."""
    by_prompt: list[list[float]] = [[0.0]] * len(order)
    for position, prompt in enumerate(order):
        by_prompt[prompt] = patterns[position]
    return ScriptedBackend(by_prompt)


class StepRecorder:
    """Runs steps like the train loop and records every ask as (prompt, rollouts, phase) tuples."""

    def __init__(self, allocator: BaseAllocator, backend: Any) -> None:
        self.allocator, self.backend = allocator, backend
        self.asks: list[list[tuple[int, int, str]]] = []

    def step(self, step: int) -> list[Any]:
        a = self.allocator
        a.start_step(step)
        self.asks = []
        while (ask := a.ask()) is not None:
            self.asks.append([(i.prompt_id, i.num_rollouts, i.phase) for i in ask.items])
            a.tell(self.backend.generate(ask))
        groups = a.train_groups()
        self.backend.update(groups)
        self.backend.retain(a.live_refs())
        return groups


def run_scripted_step(
    config: dict[str, Any],
    patterns: list[list[float]],
    rollouts_per_step: int,
    *,
    num_prompts: int | None = None,
    seed: int = 0,
) -> tuple[list[int], StepRecorder, list[Any]]:
    """Step 0 of ``config`` against :func:`scripted_by_position` (the prompt at epoch-0 position i
    gets ``patterns[i]``; positions past the patterns never succeed). Returns the epoch order,
    the recorder (``.allocator``, ``.asks``) and the groups."""
    num_prompts = num_prompts or len(patterns)
    order = epoch_order(num_prompts, seed)
    backend = scripted_by_position(order, [*patterns] + [[0.0]] * (num_prompts - len(patterns)))
    allocator = create_allocator(
        config,
        num_prompts=num_prompts,
        rollouts_per_step=rollouts_per_step,
        seed=seed,
        oracle=backend.success_probabilities,
    )
    run = StepRecorder(allocator, backend)
    return order, run, run.step(0)


@pytest.fixture
def make() -> Any:
    def _make(config: dict[str, Any], backend: Any, rollouts_per_step: int, seed: int = 0):
        allocator = create_allocator(
            config,
            num_prompts=backend.num_prompts,
            rollouts_per_step=rollouts_per_step,
            seed=seed,
            oracle=backend.success_probabilities,
        )
        return StepRecorder(allocator, backend)

    return _make
