"""The tiny backend's own behaviour: learning direction, evaluation keys, config errors, imports."""

from __future__ import annotations

import pickle
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


def _informative_groups(backend, prompt_ids: list[int], n: int) -> list[Group]:
    """Groups of ``n`` rollouts with rewards forced to 1, 0, 1, 0, ...: every row is forwarded."""
    outcomes = backend.generate(Ask(tuple(AskItem(p, n) for p in prompt_ids)))
    rewards = np.array([1.0, 0.0] * (n // 2))
    return [Group(o.prompt_id, o.refs, rewards) for o in outcomes]


def _adam_steps(backend) -> int:
    steps = {int(s["step"]) for s in backend.optimizer.state_dict()["state"].values()}
    assert len(steps) == 1  # every parameter took the same steps
    return steps.pop()


@pytest.mark.parametrize(("k", "epochs"), [(1, 1), (3, 1), (4, 2)])
def test_k_minibatches_are_k_adam_steps(tiny_cache: Path, k: int, epochs: int) -> None:
    backend = create_backend(micro_config(tiny_cache, num_minibatches=k, ppo_epochs=epochs), seed=0)
    metrics = backend.update(_informative_groups(backend, list(range(8)), 4))
    assert _adam_steps(backend) == k * epochs
    assert metrics["optimizer_steps"] == k * epochs and metrics["minibatches"] == k
    assert metrics["zero_grad_steps"] == 0
    # 8 groups of 4 split group-aligned: 32 / k rollouts each, up to one group apart
    assert metrics["minibatch_rollouts_max"] - metrics["minibatch_rollouts_min"] <= 4
    assert metrics["minibatch_rollouts_min"] >= 4 * (8 // k)
    assert backend.policy_version == 1
    backend.update(_informative_groups(backend, [8, 9], 4))  # fewer groups than k: one each
    assert _adam_steps(backend) == k * epochs + min(k, 2) * epochs


def test_every_minibatch_clips_against_the_policy_before_the_update(tiny_cache: Path) -> None:
    # On-policy rows have ratio 1 at the first Adam step, so one mini-batch never clips with
    # one epoch; a later mini-batch is scored by the moved policy against the old log-probs
    # and clips (a per-mini-batch recomputation would give ratio 1 again and clip nothing).
    knobs = {"lr": 3e-2, "clip_eps": 1e-3}
    one = create_backend(micro_config(tiny_cache, num_minibatches=1, **knobs), seed=0)
    assert one.update(_informative_groups(one, list(range(4)), 4))["clip_frac"] == 0.0
    four = create_backend(micro_config(tiny_cache, num_minibatches=4, **knobs), seed=0)
    assert four.update(_informative_groups(four, list(range(4)), 4))["clip_frac"] > 0.0


def test_zero_gradient_minibatch_still_steps_adam(tiny_cache: Path) -> None:
    backend = create_backend(micro_config(tiny_cache, num_minibatches=2), seed=0)
    (live, flat) = backend.generate(Ask((AskItem(0, 4), AskItem(1, 4))))
    groups = [Group(0, live.refs, np.array([1.0, 0.0, 0.0, 1.0])), Group(1, flat.refs, np.ones(4))]
    metrics = backend.update(groups)
    assert metrics["optimizer_steps"] == 2 and metrics["zero_grad_steps"] == 1
    assert _adam_steps(backend) == 2


def test_minibatch_shuffle_does_not_touch_the_sampling_stream(tiny_cache: Path) -> None:
    a = create_backend(micro_config(tiny_cache, num_minibatches=1), seed=4)
    b = create_backend(micro_config(tiny_cache, num_minibatches=3), seed=4)
    for backend in (a, b):
        backend.update(_informative_groups(backend, list(range(6)), 4))
    assert torch.equal(a.generator.get_state(), b.generator.get_state())


def test_num_minibatches_must_be_a_positive_int() -> None:
    for bad in (0, -1, 1.5, True):
        with pytest.raises(ValueError, match="num_minibatches"):
            TinyConfig(num_minibatches=bad)


def test_state_round_trip_with_minibatches_continues_bit_exactly(tiny_cache: Path) -> None:
    # the contract suite's micro base gets no reward, so its updates never step: here every
    # group is informative and each update is three Adam steps over shuffled mini-batches
    config = micro_config(tiny_cache, num_minibatches=3)
    original, restored = create_backend(config, seed=7), create_backend(config, seed=7)
    original.update(_informative_groups(original, list(range(6)), 4))
    state = pickle.loads(pickle.dumps(original.state_dict()))

    def continuation(backend) -> list:
        out = []
        for first in (10, 20):
            metrics = backend.update(_informative_groups(backend, list(range(first, first + 7)), 4))
            weights = [v.clone() for v in backend.model.state_dict().values()]
            out.append((sorted(metrics.items()), weights))
        return out

    expected = continuation(original)
    restored.load_state_dict(state)
    got = continuation(restored)
    for (m_a, w_a), (m_b, w_b) in zip(expected, got, strict=True):
        assert m_a == m_b
        assert all(torch.equal(x, y) for x, y in zip(w_a, w_b, strict=True))
    assert expected[0][0] != continuation(create_backend(config, seed=8))[0][0]
