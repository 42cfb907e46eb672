"""The tiny backend's own behaviour: learning direction, evaluation keys, config errors, imports."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from rollcli.allocators.api import Ask, AskItem, Group
from rollcli.backends import create_backend
from rollcli.backends.tiny.config import TinyConfig
from rollcli.backends.tiny.model import pad_batch, response_logprobs

from .conftest import micro_config


def _logp(backend, refs) -> list[float]:
    prompts = [backend.pool.prompts[backend._store[r][0]] for r in refs]
    responses = [backend._store[r][1] for r in refs]
    inputs, targets, mask = pad_batch(prompts, responses)
    with torch.no_grad():
        lp = response_logprobs(backend.model, inputs, targets, backend.config.temperature)
    return ((lp * mask).sum(dim=1)).tolist()


def test_update_moves_logprobs_in_the_advantage_direction(tiny_cache: Path) -> None:
    backend = create_backend(micro_config(tiny_cache, lr=3e-3), seed=0)
    (outcome,) = backend.generate(Ask((AskItem(0, 8),)))
    # pick two different responses and declare the first right, the second wrong
    refs = list(outcome.refs)
    texts = [backend._store[r][1] for r in refs]
    first = refs[0]
    second = next(r for r, t in zip(refs, texts, strict=True) if t != texts[0])
    before = _logp(backend, [first, second])
    metrics = backend.update([Group(0, (first, second), np.array([1.0, 0.0]))])
    after = _logp(backend, [first, second])
    assert after[0] > before[0] and after[1] < before[1]
    assert metrics["skipped"] == 0.0 and metrics["grad_norm"] > 0


def test_zero_variance_and_singleton_groups_change_nothing(tiny_cache: Path) -> None:
    backend = create_backend(micro_config(tiny_cache), seed=0)
    outcomes = backend.generate(Ask((AskItem(0, 4), AskItem(1, 1))))
    weights = {k: v.clone() for k, v in backend.model.state_dict().items()}
    flat = Group(0, outcomes[0].refs, np.ones(4))
    single = Group(1, outcomes[1].refs, np.array([1.0]))
    metrics = backend.update([flat, single])
    assert metrics["skipped"] == 1.0 and backend.policy_version == 1
    assert all(torch.equal(weights[k], v) for k, v in backend.model.state_dict().items())
    active = backend.update([Group(0, outcomes[0].refs, np.array([1.0, 0.0, 0.0, 1.0]))])
    assert sorted(active) == sorted(metrics)  # the same metric keys whether skipped or not


def test_kl_and_several_ppo_epochs(tiny_cache: Path) -> None:
    backend = create_backend(
        micro_config(tiny_cache, kl_coef=0.5, ppo_epochs=3, lr=1e-2, clip_eps=0.05), seed=0
    )
    (outcome,) = backend.generate(Ask((AskItem(2, 6),)))
    rewards = np.array([1.0, 0.0, 1.0, 0.0, 0.0, 0.0])
    first = backend.update([Group(2, outcome.refs, rewards)])
    assert first["rows_forwarded"] == 6 and first["kl"] >= 0.0
    assert first["clip_frac"] > 0.0  # later epochs move the ratio past a small clip range
    (again,) = backend.generate(Ask((AskItem(2, 6),)))
    second = backend.update([Group(2, again.refs, rewards)])
    assert second["kl"] > 0.0  # the policy has left the reference
    idle = backend.update([Group(2, again.refs, np.ones(6))])
    assert idle["skipped"] == 0.0  # with a KL term every row is forwarded
    assert sorted(first) == sorted(second) == sorted(idle)


def test_evaluate_reports_levels_tasks_and_modes(tiny_cache: Path) -> None:
    sampled = create_backend(micro_config(tiny_cache), seed=0).evaluate()
    for key in ("accuracy", "greedy", "mean@2", "level1", "level3", "task_add", "task_reverse"):
        assert key in sampled
    assert sampled["accuracy"] == sampled["mean@2"]
    greedy = create_backend(micro_config(tiny_cache, eval_mode="greedy"), seed=0).evaluate()
    assert greedy["accuracy"] == greedy["greedy"] and "mean@2" not in greedy
    # evaluation has its own generator: it is repeatable and never moves the training stream
    backend = create_backend(micro_config(tiny_cache), seed=1)
    state = backend.generator.get_state().clone()
    assert backend.evaluate() == backend.evaluate()
    assert torch.equal(backend.generator.get_state(), state)


@pytest.mark.parametrize(
    ("knobs", "message"),
    [
        ({"task_mix": {"mul": 1.0}}, "unknown task 'mul'"),
        ({"task_mix": {"add": 0.0}}, "share of 'add'"),
        ({"d_model": 30, "num_heads": 4}, "divisible by num_heads"),
        ({"max_level": 6}, "max_level"),
        ({"clip_eps": 0}, "clip_eps"),
        ({"eval_mode": "best"}, "eval_mode"),
    ],
)
def test_config_errors_name_the_knob(knobs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        TinyConfig(**knobs)


def test_unknown_knob_is_rejected(tiny_cache: Path) -> None:
    with pytest.raises(ValueError, match="unknown knob.*lrr"):
        create_backend({**micro_config(tiny_cache), "lrr": 1.0}, seed=0)


def test_config_imports_without_torch() -> None:
    code = (
        "import sys; from rollcli.backends.tiny.config import TinyConfig; TinyConfig(); "
        "import rollcli.backends.tiny; assert 'torch' not in sys.modules, 'torch imported'"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
