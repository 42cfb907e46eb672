"""The sim backend's mini-batch updates, per-prompt learning and gradient noise scale."""

from __future__ import annotations

import copy

import numpy as np
import pytest

from rollcli.allocators.api import Ask, AskItem, Group
from rollcli.backends.minibatches import split_minibatches
from rollcli.backends.sim import SimConfig, create_sim_backend
from rollcli.backends.sim.backend import SimBackend
from rollcli.backends.sim.pool import logit, sigmoid

SMALL = {"kind": "sim", "num_train_prompts": 128, "num_eval_prompts": 64}


def make(seed: int = 0, **knobs: object) -> SimBackend:
    return create_sim_backend({**SMALL, **knobs}, seed=seed)


def groups_of(backend: SimBackend, counts: dict[int, int]) -> list[Group]:
    outcomes = backend.generate(Ask(tuple(AskItem(i, n) for i, n in counts.items())))
    return [Group(o.prompt_id, o.refs, o.rewards) for o in outcomes]


def record_steps(backend: SimBackend) -> list[np.ndarray]:
    """Patch ``backend`` so every optimiser step's gradient is recorded; return the record."""
    grads: list[np.ndarray] = []
    step = backend._optimizer_step

    def recording(grad: np.ndarray) -> None:
        grads.append(grad.copy())
        step(grad)

    backend._optimizer_step = recording  # type: ignore[method-assign]
    return grads


@pytest.mark.parametrize("k", [1, 2, 4, 7])
def test_k_minibatches_take_k_adam_steps_and_one_policy_version(k: int) -> None:
    backend = make(num_minibatches=k)
    groups = groups_of(backend, {i: 8 for i in range(32)})
    metrics = backend.update(groups)
    assert backend._t == k and metrics["optimizer_steps"] == k
    assert backend.policy_version == 1
    assert metrics["minibatch_rollouts"] == pytest.approx(32 * 8 / k)
    backend.update(groups_of(backend, {i: 8 for i in range(32, 64)}))
    assert backend._t == 2 * k and backend.policy_version == 2


def test_fewer_groups_than_minibatches_and_no_groups() -> None:
    backend = make(num_minibatches=4)
    assert backend.update(groups_of(backend, {0: 8, 1: 8}))["optimizer_steps"] == 2
    assert backend._t == 2
    assert backend.update([])["optimizer_steps"] == 1  # a zero-gradient step, as with k = 1
    assert backend._t == 3 and backend.policy_version == 2


def test_minibatches_are_whole_groups_of_near_equal_size() -> None:
    # SGD without noise: each optimiser step's gradient is the mean of sum_j A_j r_j over the
    # rollouts of the groups in its mini-batch, so the recorded steps reveal the partition.
    backend = make(num_minibatches=3, optimizer="sgd", score_noise=0.0)
    counts = {i: n for i, n in enumerate([2, 16, 4, 8, 8, 3, 12, 6, 9, 5])}
    groups = groups_of(backend, counts)
    rng = copy.deepcopy(backend.rng)
    grads = record_steps(backend)
    backend.update(groups)
    sizes = [g.size for g in groups]
    parts = split_minibatches(sizes, 3, rng)
    assert sorted(np.concatenate(parts).tolist()) == list(range(len(groups)))
    ideal = sum(sizes) / 3
    assert all(abs(sum(sizes[i] for i in part) - ideal) <= max(sizes) for part in parts)
    assert len(grads) == 3
    for part, grad in zip(parts, grads, strict=True):
        total = sum(sizes[i] for i in part)
        expected = 0.0
        for i in part:
            r = groups[i].rewards
            if np.ptp(r) > 0:
                a = (r - r.mean()) / (r.std(ddof=1) + backend.config.adv_eps)
                expected += float(a @ r)
        assert grad[0] == pytest.approx(expected / total, rel=1e-9, abs=1e-12)


def test_one_minibatch_keeps_the_order_and_draws_nothing() -> None:
    a, b = make(num_minibatches=1), make(num_minibatches=4)
    ga, gb = groups_of(a, {i: 8 for i in range(16)}), groups_of(b, {i: 8 for i in range(16)})
    state = a.rng.bit_generator.state
    a.update(ga)
    assert a.rng.bit_generator.state == state
    b.update(gb)
    assert b.rng.bit_generator.state != state


def test_per_prompt_learning_moves_only_trained_prompts() -> None:
    backend = make(prompt_lr=0.2, prompt_noise=0.5, score_noise=0.0, num_minibatches=2)
    trained = np.arange(10)
    others = np.arange(10, 128)
    for _ in range(30):
        backend.update(groups_of(backend, {int(i): 8 for i in trained}))
    assert np.all(backend.offset[others] == 0.0)
    assert backend.offset[trained].mean() > 0.5  # GRPO pushes trained prompts up
    # an untrained prompt's logit is the shared part alone
    p = backend.success_probabilities(others)
    shared = backend.theta[0] - backend.pool.train_difficulty[others]
    np.testing.assert_allclose(logit(p), shared, atol=1e-9)


def test_per_prompt_update_is_the_groups_summed_score() -> None:
    # rewards [1,0,0,0]: A = [1.5,-.5,-.5,-.5], sum_j A_j (r_j - p) = 1.5 for any p
    backend = make(prompt_lr=0.1, prompt_noise=0.0, score_noise=0.0, optimizer="sgd", lr=1e-12)
    for _ in range(200):
        (group,) = groups_of(backend, {3: 4})
        if group.rewards.tolist() == [1.0, 0.0, 0.0, 0.0]:
            break
    else:
        pytest.fail("no [1, 0, 0, 0] group in 200 tries")
    backend.update([group])
    assert backend.offset[3] == pytest.approx(0.1 * 1.5, rel=1e-5)


def test_held_out_accuracy_ignores_the_per_prompt_part() -> None:
    plain = make(num_minibatches=4, prompt_lr=0.0)
    memorising = make(num_minibatches=4, prompt_lr=5.0, prompt_noise=0.0)  # the same draws
    for backend in (plain, memorising):
        backend.update(groups_of(backend, {i: 8 for i in range(64)}))
    # the same rewards (generated before any offset) give the same shared update
    np.testing.assert_array_equal(plain.theta, memorising.theta)
    assert plain.evaluate()["accuracy"] == memorising.evaluate()["accuracy"]
    assert memorising.evaluate()["pool_accuracy"] > plain.evaluate()["pool_accuracy"]
    memorising.offset[:] = 50.0
    assert memorising.evaluate()["accuracy"] == plain.evaluate()["accuracy"]
    assert memorising.evaluate()["pool_accuracy"] == pytest.approx(1.0)


def test_prompt_noise_is_zero_mean() -> None:
    # Averaged over many updates, the noisy per-prompt step equals the noise-free one.
    noisy = make(prompt_lr=1.0, prompt_noise=3.0, score_noise=0.0)
    outcomes = groups_of(noisy, dict.fromkeys(range(128), 8))
    steps, clean = [], []
    for group in outcomes:
        noisy.offset[:] = 0.0
        noisy.update([group])
        steps.append(noisy.offset[group.prompt_id])
        r = group.rewards
        a = (r - r.mean()) / (r.std(ddof=1) + 1e-6) if np.ptp(r) > 0 else 0 * r
        clean.append(float(a @ r))
    diff = np.array(steps) - np.array(clean)
    informative = diff != 0
    assert informative.sum() > 30
    assert abs(diff.mean()) < 4 * diff.std() / np.sqrt(diff.size)


def test_noise_scale_matches_the_brute_force_estimate() -> None:
    backend = make(score_noise=4.0, num_minibatches=1)
    groups = groups_of(backend, {i: 8 for i in range(40, 104)})
    idx = backend._lookup(np.array([r for g in groups for r in g.refs]))
    rewards = backend._store["reward"][idx]
    xi = backend._store["noise"][idx, 0]
    p = sigmoid(backend._logits(backend._store["prompt"][idx]))
    x, s = [], []
    for g in range(len(groups)):
        r = rewards[8 * g : 8 * g + 8]
        a = (r - r.mean()) / (r.std(ddof=1) + 1e-6)
        x.append(a * ((r - p[8 * g : 8 * g + 8]) + 4.0 * xi[8 * g : 8 * g + 8]))
        s.append(a * (r - p[8 * g : 8 * g + 8]))
    x, s = np.concatenate(x), np.concatenate(s)
    expected = x.var(ddof=1) / s.mean() ** 2
    metrics = backend.update(groups)
    assert metrics["b_noise"] == pytest.approx(expected, rel=1e-9)
    assert metrics["noise_scale"] == pytest.approx(expected / x.size, rel=1e-9)


def test_no_signal_reports_no_noise_scale() -> None:
    backend = make(score_noise=4.0, num_minibatches=2)
    flat = [g for g in groups_of(backend, dict.fromkeys(range(128), 8)) if np.ptp(g.rewards) == 0]
    metrics = backend.update(flat)
    assert "noise_scale" not in metrics and metrics["grad_norm"] == 0.0


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "4"])
def test_num_minibatches_must_be_a_positive_int(bad: object) -> None:
    with pytest.raises(ValueError, match="num_minibatches must be an integer >= 1"):
        SimConfig(num_minibatches=bad)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="prompt_lr must be >= 0"):
        SimConfig(prompt_lr=-0.1)
