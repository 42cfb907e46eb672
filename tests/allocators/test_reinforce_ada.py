"""Reinforce-Ada: kept counts and rounds on hand-computed cases; the whole step and the
global-statistics advantage of sim, tiny and verl against a transcription of the official code."""

from __future__ import annotations

import importlib.util
from typing import Any

import numpy as np
import pytest
import torch

from rollcli.allocators import create_allocator
from rollcli.allocators.reinforce_ada import ReinforceAdaConfig, global_baseline, kept_counts

from .conftest import run_scripted_step
from .official_reinforce_ada import official_grpo_advantage, official_step


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        # finished, balanced: exactly 2 + 2
        ((5, 3, 4, "balanced", True), (2, 2)),
        # fallback, balanced: no positive -> 4 negatives; one positive -> 1 + 3
        ((0, 32, 4, "balanced", False), (0, 4)),
        ((1, 31, 4, "balanced", False), (1, 3)),
        ((31, 1, 4, "balanced", False), (3, 1)),
        ((3, 0, 4, "balanced", False), (3, 0)),  # fewer samples than num_keep
        # finished, positive-focused: up to 2 positives, then negatives, then positives
        ((1, 7, 4, "positive_focused", True), (1, 3)),
        ((6, 1, 4, "positive_focused", True), (3, 1)),
        ((8, 0, 4, "positive_focused", True), (4, 0)),
        # fallback, positive-focused (no positive drawn): the negatives
        ((0, 32, 4, "positive_focused", False), (0, 4)),
        ((0, 1, 4, "positive_focused", False), (0, 1)),
        # odd num_keep: 1 positive + 2 negatives when balanced
        ((4, 4, 3, "balanced", True), (1, 2)),
    ],
)
def test_kept_counts(args: tuple, expected: tuple[int, int]) -> None:
    assert tuple(int(x) for x in kept_counts(*args)) == expected


def test_global_baseline() -> None:
    assert global_baseline(3, 5) == 3 / 8
    assert global_baseline(1, 0) == 0.0 and global_baseline(0, 1) == 0.0  # one sample: mean 0
    assert global_baseline(0, 0) == 0.0 and global_baseline(2, 0) == 1.0


def _step(config: dict[str, Any], patterns: list[list[float]], rollouts: int):
    order, run, groups = run_scripted_step(config, patterns, rollouts)
    return order, run.allocator, run.asks, {g.prompt_id: g for g in groups}


def test_rounds_kept_sets_and_baselines_by_hand() -> None:
    config = {"kind": "reinforce_ada", "round_repeat": 4, "max_rounds": 3}
    patterns = [
        [1, 0, 1, 0],  # o0: 2 + 2 in round 0 -> finished
        [1, 1, 1, 1, 0, 0, 0, 0],  # o1: 4 positives, then 4 negatives in round 1
        [0.0],  # o2: never positive -> fallback after 3 rounds: 4 negatives
        [0.9, 0.5, 0.7, 0.71],  # o3: > 0.7 positive (0.7 is not): 2 + 2 in round 0
    ]
    order, alloc, asks, groups = _step(config, patterns, 16)
    o = order
    assert alloc.batch_prompts == 4 and alloc.max_step_rollouts == 4 * 3 * 4
    assert asks == [
        [(o[0], 4, "round0"), (o[1], 4, "round0"), (o[2], 4, "round0"), (o[3], 4, "round0")],
        [(o[1], 4, "round1"), (o[2], 4, "round1")],
        [(o[2], 4, "round2")],
    ]
    # refs: round 0 gives o0 0-3, o1 4-7, o2 8-11, o3 12-15; round 1 o1 16-19, o2 20-23; ...
    g0, g1, g2, g3 = (groups[o[i]] for i in range(4))
    assert (list(g0.refs), g0.rewards.tolist(), g0.baseline) == ([0, 2, 1, 3], [1, 1, 0, 0], 0.5)
    assert (list(g1.refs), g1.baseline) == ([4, 5, 16, 17], 0.5)  # 4 of 8 drawn positive
    assert (list(g2.refs), g2.rewards.tolist(), g2.baseline) == ([8, 9, 10, 11], [0] * 4, 0.0)
    assert (list(g3.refs), g3.rewards.tolist()) == ([12, 15, 13, 14], [0.9, 0.71, 0.5, 0.7])
    assert g3.baseline == 0.5
    stats = alloc.stats()
    assert (stats["rounds"], stats["finished"], stats["fallback"], stats["no_positive"]) == (
        3,
        3,
        1,
        1,
    )
    assert stats["draws_per_prompt"] == (4 + 8 + 12 + 4) / 4
    ledger = alloc.ledger
    assert (ledger.step_rollouts, ledger.step_trained_rollouts) == (28, 16)


def test_local_statistics_and_positive_focused() -> None:
    config = {"kind": "reinforce_ada", "choice": "positive_focused", "global_stats": False}
    patterns = [[0] * 7 + [1], [1.0]]
    order, alloc, asks, groups = _step(config, patterns, 8)
    assert [len(a) for a in asks] == [2]  # both have a positive after round 0 (8 rollouts)
    g0, g1 = groups[order[0]], groups[order[1]]
    assert g0.baseline is None and g0.rewards.tolist() == [1, 0, 0, 0]
    assert list(g0.refs) == [7, 0, 1, 2]
    assert g1.rewards.tolist() == [1, 1, 1, 1]
    with pytest.raises(ValueError, match="not divisible by num_keep=4"):
        create_allocator(config, num_prompts=4, rollouts_per_step=10, seed=0)
    with pytest.raises(ValueError, match="choice must be one of"):
        ReinforceAdaConfig(choice="positive")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="round_repeat must be >= 1"):
        ReinforceAdaConfig(round_repeat=0)


# -- against the transcription of the official code ------------------------------------------


def _random_config(rng: np.random.Generator) -> dict[str, Any]:
    return {
        "kind": "reinforce_ada",
        "num_keep": int(rng.integers(1, 7)),
        "round_repeat": int(rng.integers(1, 9)),
        "max_rounds": int(rng.integers(1, 5)),
        "positive_threshold": float(rng.choice([0.7, 0.5, 0.0])),
        "choice": str(rng.choice(["balanced", "positive_focused"])),
    }


def _random_patterns(rng: np.random.Generator, num: int, length: int) -> list[list[float]]:
    patterns = []
    for _ in range(num):
        p = float(rng.choice([0.0, 1.0, rng.random()]))
        if rng.random() < 0.7:
            patterns.append((rng.random(length) < p).astype(float).tolist())
        else:  # non-binary rewards: the threshold decides what is positive
            patterns.append(rng.choice([0.0, 0.5, 0.7, 0.75, 1.0], size=length).tolist())
    return patterns


def _compare_one_step(config: dict[str, Any], patterns: list[list[float]]):
    """Run one step of ours and of the official code on the same rewards; return both sides."""
    num = len(patterns)
    length = len(patterns[0])
    order, alloc, asks, groups = _step(config, patterns, config["num_keep"] * num)
    by_prompt = {p: patterns[i] for i, p in enumerate(order)}
    drawn = dict.fromkeys(by_prompt, 0)

    def generate(active: list[str], repeat: int) -> dict[str, list[float]]:
        out = {}
        for uid in active:
            p = int(uid)
            out[uid] = [by_prompt[p][(drawn[p] + j) % length] for j in range(repeat)]
            drawn[p] += repeat
        return out

    selected, pos, neg, rounds = official_step(
        [str(p) for p in order],
        generate,
        reinforce_ada_choice=config["choice"],
        positive_threshold=config["positive_threshold"],
        max_rounds=config["max_rounds"],
        round_repeat=config["round_repeat"],
        final_keep_per_prompt=config["num_keep"],
    )
    return order, alloc, asks, groups, selected, pos, neg, rounds


def test_step_matches_the_transcribed_official_code() -> None:
    rng = np.random.default_rng(0)
    for _ in range(400):
        config = _random_config(rng)
        patterns = _random_patterns(rng, int(rng.integers(1, 9)), 32)
        order, alloc, asks, groups, selected, pos, neg, rounds = _compare_one_step(config, patterns)
        assert len(asks) == rounds
        theirs = {int(rows[0][0]): rows for rows in selected}
        assert sorted(groups) == sorted(theirs)
        for p, g in groups.items():
            assert g.rewards.tolist() == [r for _, _, r in theirs[p]], (config, p)
            assert g.baseline == global_baseline(pos[str(p)], neg[str(p)])
            # every sample drawn counts in the official pos/neg totals, and we drew as many
            assert pos[str(p)] + neg[str(p)] == sum(n for a in asks for q, n, _ in a if q == p)


def _draw_index(asks: list, prompt: int) -> dict[int, int]:
    """ref -> the index of that rollout among the prompt's draws (refs are handed out in ask order)."""
    index, ref = {}, 0
    count = 0
    for ask in asks:
        for q, n, _ in ask:
            for _ in range(n):
                if q == prompt:
                    index[ref] = count
                    count += 1
                ref += 1
    return index


def test_kept_rollouts_are_the_official_ones() -> None:
    rng = np.random.default_rng(1)
    for _ in range(200):
        config = _random_config(rng)
        patterns = _random_patterns(rng, int(rng.integers(1, 6)), 32)
        order, alloc, asks, groups, selected, *_ = _compare_one_step(config, patterns)
        theirs = {int(rows[0][0]): [j for _, j, _ in rows] for rows in selected}
        for p, g in groups.items():
            index = _draw_index(asks, p)
            assert [index[r] for r in g.refs] == theirs[p], (config, p)


# -- the advantage every backend trains on, against the official estimator --------------------


def _official_cases(seed: int, count: int):
    """Groups the allocator built, with the official per-row advantage for each."""
    rng = np.random.default_rng(seed)
    cases = []
    for k in range(count):
        config = _random_config(rng)
        if k % 5 == 0:  # groups of one rollout, from one sample (baseline 0) or more
            config.update(num_keep=1, round_repeat=int(rng.integers(1, 3)), max_rounds=1)
        patterns = _random_patterns(rng, int(rng.integers(1, 6)), 32)
        _, _, _, groups, _, pos, neg, _ = _compare_one_step(config, patterns)
        ordered = list(groups.values())
        scores = torch.tensor(np.concatenate([g.rewards for g in ordered]), dtype=torch.float32)
        index = [str(g.prompt_id) for g in ordered for _ in range(g.size)]
        official = official_grpo_advantage(scores, index, pos, neg).numpy()
        cases.append((ordered, official))
    assert any(g.size == 1 for groups, _ in cases for g in groups)
    return cases


@pytest.mark.parametrize("std_normalize", [True, False])
def test_sim_and_tiny_advantages_are_the_official_ones(std_normalize: bool) -> None:
    """Whatever the backend's std normalisation, a baseline group trains on r - b (official:
    ``norm_adv_by_std_in_grpo=False``); a group of one rollout too."""
    from rollcli.backends.sim.update import group_advantages as sim_advantages
    from rollcli.backends.sim.update import with_baselines
    from rollcli.backends.tiny.grpo import group_advantages

    for groups, official in _official_cases(2, 100):
        sizes = np.array([g.size for g in groups])
        gid = np.repeat(np.arange(len(groups)), sizes)
        rewards = np.concatenate([g.rewards for g in groups])
        sim = with_baselines(
            sim_advantages(rewards, gid, sizes, std_normalize, 1e-6), rewards, gid, groups
        )
        np.testing.assert_allclose(sim, official, rtol=1e-6, atol=1e-6)
        tiny = group_advantages(
            [g.rewards for g in groups],
            std_normalize=std_normalize,
            baselines=[g.baseline for g in groups],
        )
        np.testing.assert_allclose(np.concatenate(tiny), official, rtol=1e-6, atol=1e-6)


@pytest.mark.verl
@pytest.mark.skipif(importlib.util.find_spec("verl") is None, reason="needs the verl extra")
@pytest.mark.parametrize("norm", [True, False])
def test_verl_advantages_are_the_official_ones(norm: bool) -> None:
    """verl's advantage step as the trainer runs it (one uid per group, the baseline column)."""
    from omegaconf import OmegaConf
    from verl import DataProto

    from rollcli.backends.verl.advantages import (
        BASELINE_KEY,
        baseline_column,
        compute_group_advantages,
    )

    algorithm = OmegaConf.create({"adv_estimator": "grpo", "norm_adv_by_std_in_grpo": norm})
    for groups, official in _official_cases(3, 60):
        sizes = [g.size for g in groups]
        n, length = sum(sizes), 3
        scores = torch.zeros(n, length)
        mask = torch.ones(n, length)
        scores[:, -1] = torch.tensor(np.concatenate([g.rewards for g in groups]))
        batch = DataProto.from_dict(
            tensors={"token_level_rewards": scores, "token_level_scores": scores, "response_mask": mask},
            non_tensors={
                "uid": np.array([f"g{i}" for i, s in enumerate(sizes) for _ in range(s)], dtype=object),
                BASELINE_KEY: baseline_column([g.baseline for g in groups], sizes),
            },
        )  # fmt: skip
        adv = compute_group_advantages(batch, algorithm).batch["advantages"]
        np.testing.assert_allclose(adv[:, 0].numpy(), official, rtol=1e-6, atol=1e-6)
        assert torch.equal(adv[:, 0:1].expand(-1, length), adv)  # every token of the response


def _one_step_update(backend: Any, config: dict[str, Any], rollouts: int):
    alloc = create_allocator(
        config, num_prompts=backend.num_prompts, rollouts_per_step=rollouts, seed=0
    )
    alloc.start_step(0)
    while (ask := alloc.ask()) is not None:
        alloc.tell(backend.generate(ask))
    groups = alloc.train_groups()
    return groups, backend.update(groups)


@pytest.mark.parametrize("std_normalize", [True, False])
def test_sim_update_trains_on_r_minus_baseline(std_normalize: bool) -> None:
    from rollcli.backends.sim import create_sim_backend

    backend = create_sim_backend(
        {"kind": "sim", "num_train_prompts": 256, "num_eval_prompts": 64, "std_normalize": std_normalize},
        seed=0,
    )  # fmt: skip
    groups, metrics = _one_step_update(backend, {"kind": "reinforce_ada"}, 256)
    assert len(groups) == 64 and {g.size for g in groups} <= {1, 2, 3, 4}
    adv = np.concatenate([g.rewards - g.baseline for g in groups])
    assert metrics["adv_abs_mean"] == pytest.approx(np.abs(adv).mean(), rel=1e-9)


def test_tiny_update_trains_on_r_minus_baseline(tmp_path) -> None:
    from rollcli.backends import create_backend

    tiny = {
        "kind": "tiny", "max_level": 1, "num_train_prompts": 48, "eval_prompts_per_level": 3,
        "eval_samples": 2, "d_model": 16, "num_layers": 1, "num_heads": 2, "base_steps": 150,
        "base_batch_size": 16, "base_lr": 1e-2, "lr": 1e-3, "cache_dir": str(tmp_path),
    }  # fmt: skip
    backend = create_backend(tiny, seed=0)
    config = {"kind": "reinforce_ada", "round_repeat": 4, "max_rounds": 2}
    groups, metrics = _one_step_update(backend, config, 32)
    adv = np.concatenate([g.rewards - g.baseline for g in groups])
    nonzero = adv[adv != 0]
    assert nonzero.size > 0 and metrics["rows_forwarded"] == nonzero.size
    assert metrics["adv_abs_mean"] == pytest.approx(np.abs(nonzero).mean(), rel=1e-9)
