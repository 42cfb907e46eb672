"""bayes_budget on hand-computed cases: the predictive values, the decay, pilots, commits, groups."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from rollcli.allocators import create_allocator
from rollcli.allocators.bayes_budget import BayesBudgetConfig
from rollcli.allocators.bayes_budget_spread import (
    baseline_values,
    rho_squared,
    spread_baseline_counts,
)
from rollcli.allocators.oracle_signal import group_signal_stats, size_menu
from rollcli.allocators.posterior_signal import PosteriorSignalTable, posterior_signal_stats
from rollcli.testing import ScriptedBackend
from rollcli.testing.fakes import drive_step


def make(patterns: list[list[float]], budget: int, **knobs: object):
    backend = ScriptedBackend(patterns)
    alloc = create_allocator(
        {"kind": "bayes_budget", **knobs},
        num_prompts=len(patterns),
        rollouts_per_step=budget,
        seed=0,
    )
    return alloc, backend


# -- predictive values ---------------------------------------------------------------------
def test_uniform_prior_pair_by_hand() -> None:
    # Beta(1, 1), n = 2: k is uniform on {0, 1, 2}; only k = 1 has signal sqrt(1*1*1/2)
    s, v = posterior_signal_stats(np.array([1.0]), np.array([1.0]), 2)
    assert s[0] == pytest.approx(math.sqrt(0.5) / 3, rel=1e-12)
    assert v[0] == pytest.approx(1 / 3, rel=1e-12)
    # without std normalisation both are k (n - k) / n = 1/2 at k = 1
    s, v = posterior_signal_stats(np.array([1.0]), np.array([1.0]), 2, std_normalize=False)
    assert s[0] == v[0] == pytest.approx(0.5 / 3, rel=1e-12)


def test_beta_2_2_of_four_by_hand() -> None:
    # beta-binomial(4, 2, 2): P(k) = C(4, k) B(k + 2, 6 - k) / B(2, 2), B(2, 2) = 1/6 and
    # B(2, 6) = 1/42, B(3, 5) = 1/105, B(4, 4) = 1/140: P = [5, 8, 9, 8, 5] / 35
    pk = np.array([5, 8, 9, 8, 5]) / 35
    assert pk.sum() == pytest.approx(1.0)
    k = np.arange(5)
    s_k = np.where((k > 0) & (k < 4), np.sqrt(k * (4 - k) * 3 / 4), 0.0)
    s, v = posterior_signal_stats(np.array([2.0]), np.array([2.0]), 4)
    assert s[0] == pytest.approx(float(pk @ s_k), rel=1e-12)
    assert v[0] == pytest.approx(3 * (pk[1] + pk[2] + pk[3]), rel=1e-12)


def test_point_masses_and_the_known_p_limit() -> None:
    s, v = posterior_signal_stats(np.array([0.0, 3.0]), np.array([3.0, 0.0]), 8)
    assert np.all(s == 0) and np.all(v == 0)  # p = 0 and p = 1 teach nothing
    for p in (0.1, 0.5, 0.8):
        for n in (2, 8, 64):
            exact, _ = group_signal_stats(p, n)
            post, _ = posterior_signal_stats(np.array([p * 1e6]), np.array([(1 - p) * 1e6]), n)
            assert post[0] == pytest.approx(exact[0], rel=1e-4)


def test_table_interpolates_the_exact_values() -> None:
    sizes = size_menu(2, 128)
    table = PosteriorSignalTable(sizes)
    rng = np.random.default_rng(3)
    a, b = rng.uniform(0.2, 60.0, 300), rng.uniform(0.2, 60.0, 300)
    signal, noise = table.lookup(a, b)
    for j in (0, 6, len(sizes) - 1):
        s, v = posterior_signal_stats(a, b, int(sizes[j]))
        np.testing.assert_allclose(signal[:, j], s, rtol=5e-3, atol=1e-3)
        np.testing.assert_allclose(noise[:, j], v, rtol=5e-3, atol=1e-3)


def test_uncertainty_lowers_the_value_of_a_large_group() -> None:
    # same mean 0.5: resting on 2 rollouts, a 64-group risks little; but p might be near 0 or 1,
    # so it is worth less than at 200 rollouts of evidence
    few, _ = posterior_signal_stats(np.array([1.0]), np.array([1.0]), 64)
    many, _ = posterior_signal_stats(np.array([100.0]), np.array([100.0]), 64)
    assert few[0] < 0.8 * many[0]


# -- the allocator ---------------------------------------------------------------------------
def test_decay_moves_evidence_towards_the_prior() -> None:
    alloc, backend = make([[1.0, 0.0]] * 4, 8, decay=0.5, pilot_share=0.0)
    alloc.alpha[:] = [5.0, 1.0, 3.0, 1.0]
    alloc.beta[:] = [1.0, 9.0, 3.0, 1.0]
    alloc.start_step(0)
    np.testing.assert_array_equal(alloc.alpha, [3.0, 1.0, 2.0, 1.0])
    np.testing.assert_array_equal(alloc.beta, [1.0, 5.0, 2.0, 1.0])


def test_one_step_by_hand() -> None:
    # 4 prompts, 16 rollouts a step, half of it on pilots of 4: 2 pilots (every prompt is unseen)
    patterns = [[1.0, 0.0], [1.0], [0.0], [1.0, 1.0, 0.0, 0.0]]
    alloc, backend = make(patterns, 16, pilot_share=0.5, n_pilot=4, n_max=8)
    alloc.start_step(0)
    pilot = alloc.ask()
    assert [i.num_rollouts for i in pilot.items] == [4, 4]
    assert {i.phase for i in pilot.items} == {"pilot"}
    piloted = pilot.prompt_ids
    alloc.tell(backend.generate(pilot))
    for pid in piloted:  # a success adds 1 to a, a failure 1 to b (prior 1, 1)
        wins = sum(patterns[pid][j % len(patterns[pid])] for j in range(4))
        assert (alloc.alpha[pid], alloc.beta[pid]) == (1.0 + wins, 1.0 + 4 - wins)
    commit = alloc.ask()
    assert commit.num_rollouts == 8  # the rest of the budget, in groups of 2..8
    assert all(2 <= i.num_rollouts <= 8 for i in commit.items)
    # a piloted prompt seen all-correct or all-wrong is worth less than an unseen one
    for pid in piloted:
        if alloc.alpha[pid] == 1.0 or alloc.beta[pid] == 1.0:
            assert pid not in commit.prompt_ids
    alloc.tell(backend.generate(commit))
    assert alloc.ask() is None
    groups = {g.prompt_id: g for g in alloc.train_groups()}
    for pid in commit.prompt_ids:  # pilot and commit rollouts train as one group
        extra = 4 if pid in piloted else 0
        assert groups[pid].size == extra + commit.items[commit.prompt_ids.index(pid)].num_rollouts
    for pid in piloted:
        if pid not in commit.prompt_ids:  # an uncommitted pilot trains only if informative
            var = np.var([patterns[pid][j % len(patterns[pid])] for j in range(4)])
            assert (pid in groups) == (var > 0)
    assert alloc.ledger.step_rollouts == 16


def test_known_prompts_are_not_piloted_and_the_middle_gets_the_budget() -> None:
    # prompt 0 known solved, 1 known failed, 2 known p = 0.5, 3 unseen; budget 8, no room for
    # pilots of 4 beyond one prompt: only the unseen prompt is uncertain
    alloc, backend = make([[1.0], [0.0], [1.0, 0.0], [1.0, 0.0]], 12, pilot_share=0.34)
    alloc.alpha[:] = [41.0, 1.0, 21.0, 1.0]
    alloc.beta[:] = [1.0, 41.0, 21.0, 1.0]
    alloc.start_step(0)
    pilot = alloc.ask()
    assert pilot.prompt_ids == [3]
    alloc.tell(backend.generate(pilot))
    commit = alloc.ask()
    assert 0 not in commit.prompt_ids and 1 not in commit.prompt_ids
    assert 2 in commit.prompt_ids and commit.num_rollouts == 8


def test_pilot_rules_and_zero_pilot_share() -> None:
    patterns = [[1.0]] * 6  # every pilot all-correct: zero variance
    for rule, trains in (("informative", False), ("all", True), ("none", False)):
        alloc, backend = make(patterns, 12, pilot_share=0.7, n_pilot=4, train_pilots=rule)
        alloc.start_step(0)
        pilot = alloc.ask()
        assert pilot.num_rollouts == 8  # int(0.7 * 12) // 4 = 2 pilots
        alloc.tell(backend.generate(pilot))
        commit = alloc.ask()
        assert not set(commit.prompt_ids) & set(pilot.prompt_ids)  # Beta(5, 1) < Beta(1, 1)
        alloc.tell(backend.generate(commit))
        assert alloc.ask() is None
        trained = {g.prompt_id for g in alloc.train_groups()}
        assert (set(pilot.prompt_ids) <= trained) == trains
        assert not (set(pilot.prompt_ids) & trained) or trains
    alloc, backend = make([[1.0, 0.0]] * 6, 12, pilot_share=0.0)
    alloc.start_step(0)
    ask = alloc.ask()
    assert {i.phase for i in ask.items} == {"commit"} and ask.num_rollouts == 12
    alloc.tell(backend.generate(ask))
    assert alloc.ask() is None


def test_state_round_trip_mid_step() -> None:
    patterns = [[1.0, 0.0, 0.0], [1.0], [0.0, 1.0], [0.0]] * 3
    a, backend = make(patterns, 24, pilot_share=0.5)
    drive_step(a, backend, 0)
    a.start_step(1)
    a.tell(backend.generate(a.ask()))
    b, _ = make(patterns, 24, pilot_share=0.5)
    b.load_state_dict(json.loads(json.dumps(a.state_dict())))
    ask_a, ask_b = a.ask(), b.ask()
    assert ask_a == ask_b
    out = backend.generate(ask_a)
    a.tell(out)
    b.tell(out)
    ga, gb = a.train_groups(), b.train_groups()
    assert [(g.prompt_id, g.refs) for g in ga] == [(g.prompt_id, g.refs) for g in gb]
    np.testing.assert_array_equal(a.alpha, b.alpha)


@pytest.mark.parametrize(
    ("knob", "value"),
    [("decay", 1.5), ("n_min", 1), ("n_pilot", 0), ("pilot_share", 1.0), ("min_evidence", -1.0),
     ("candidate_factor", 0.5), ("prior_alpha", 0.0), ("train_pilots", "some"),
     ("advantage", "none"), ("saturation_n", -1.0), ("saturation_carry", 2.0),
     ("decay_per", "visit"), ("explore_share", 1.5), ("trained_keep", -0.1)],
)  # fmt: skip
def test_bad_knobs_name_themselves(knob: str, value: object) -> None:
    with pytest.raises(ValueError, match=knob):
        BayesBudgetConfig(**{knob: value})


def test_budget_below_n_min_is_refused() -> None:
    with pytest.raises(ValueError, match="n_min"):
        make([[1.0]], 1)


# -- the diversity-aware redesign ----------------------------------------------------------
def test_baseline_values_by_hand() -> None:
    # Beta(1, 1): E[p(1-p)] = 1/6, Var(p) = 1/12, so v = 1/6 + 1/12 = 1/4
    s, v = baseline_values(np.array([1.0, 3.0]), np.array([1.0, 1.0]))
    assert s[0] == pytest.approx(1 / 6) and v[0] == pytest.approx(1 / 4)
    # Beta(3, 1): E[p(1-p)] = 3 / (4 * 5), v = s (1 + 1/4)
    assert s[1] == pytest.approx(0.15) and v[1] == pytest.approx(0.15 * 1.25)


def test_saturation_spreads_the_budget() -> None:
    # four equal prompts near 0.5 with solid evidence: without saturation the split is free to
    # concentrate; with it the budget goes evenly, since each prompt's j-th rollout gains less
    s, v = baseline_values(np.full(4, 50.0), np.full(4, 50.0))
    tie = np.arange(4) / 4
    even = spread_baseline_counts(s, v, 16, n_max=16, rho2=rho_squared(2), tie_key=tie)
    np.testing.assert_array_equal(even, [4, 4, 4, 4])
    # a prompt with five times the others' signal saturates sooner: it carries the most signal
    # but not all the budget, and the equal ones share the rest within one rollout
    s2 = np.array([0.25, 0.05, 0.05, 0.05])
    counts = spread_baseline_counts(s2, s2 * 1.01, 24, n_max=24, rho2=1.0, tie_key=tie)
    assert counts.sum() == 24 and np.all(counts > 0)
    assert counts[0] * 0.25 > 2 * counts[1:].max() * 0.05 and np.ptp(counts[1:]) <= 1


def test_split_matches_a_brute_force_optimum() -> None:
    rng = np.random.default_rng(5)
    s = rng.uniform(0.02, 0.25, 3)
    v = s * (1 + rng.uniform(0.01, 0.5, 3))
    rho2 = 0.5
    best = max(
        ((i, j, 9 - i - j) for i in range(10) for j in range(10 - i)),
        key=lambda c: (
            float(np.dot(c, s))
            / math.sqrt(float(np.dot(c, v) + rho2 * np.sum((np.array(c) * s) ** 2)))
        ),
    )
    got = spread_baseline_counts(s, v, 9, n_max=9, rho2=rho2, tie_key=np.zeros(3))
    assert tuple(got) == best


def test_diverse_preset_trains_single_rollouts_against_the_posterior_mean() -> None:
    patterns = [[1.0, 0.0]] * 40
    alloc, backend = make(patterns, 16, preset="diverse")
    alloc.alpha[:5] = 9.0  # prompts 0-4: mean 0.9 with evidence: lower signal than unseen ones
    alloc.start_step(0)
    ask = alloc.ask()
    assert {i.phase for i in ask.items} == {"commit"} and ask.num_rollouts == 16
    assert len(ask.items) == 16 and not set(ask.prompt_ids) & set(range(5))
    alloc.tell(backend.generate(ask))
    assert alloc.ask() is None
    groups = alloc.train_groups()
    assert len(groups) == 16 and all(g.size == 1 and g.baseline == 0.5 for g in groups)


def test_baseline_mode_resumes_mid_step_with_its_baselines() -> None:
    patterns = [[1.0, 0.0, 0.0], [1.0], [0.0, 1.0], [0.0]] * 3
    knobs = {"advantage": "baseline", "pilot_share": 0.5, "saturation_n": 4.0}
    a, backend = make(patterns, 24, **knobs)
    drive_step(a, backend, 0)
    a.start_step(1)
    a.tell(backend.generate(a.ask()))
    b, _ = make(patterns, 24, **knobs)
    b.load_state_dict(json.loads(json.dumps(a.state_dict())))
    ask = a.ask()
    assert b.ask() == ask
    out = backend.generate(ask)
    a.tell(out)
    b.tell(out)
    ga, gb = a.train_groups(), b.train_groups()
    assert [(g.prompt_id, g.refs, g.baseline) for g in ga] == [
        (g.prompt_id, g.refs, g.baseline) for g in gb
    ]
    assert all(g.baseline is not None for g in ga)


def test_carried_rollouts_count_against_saturation() -> None:
    # two equal prompts, one already holding 6 rollouts of recent training: with a strong
    # saturation its new rollouts gain less, so the fresh prompt gets more of the budget
    s, v = baseline_values(np.full(2, 20.0), np.full(2, 20.0))
    tie = np.array([0.0, 0.5])
    plain = spread_baseline_counts(s, v, 8, n_max=8, rho2=4.0, tie_key=tie)
    held = spread_baseline_counts(s, v, 8, n_max=8, rho2=4.0, tie_key=tie, carried=[6.0, 0.0])
    np.testing.assert_array_equal(plain, [4, 4])
    assert held.sum() == 8 and held[0] < held[1]


def test_decay_per_epoch_scales_with_the_budget_over_the_pool() -> None:
    # 8 prompts, 2 rollouts a step: a quarter of a pass per step, so 0.5 ** 0.25 of the evidence
    alloc, _ = make([[1.0, 0.0]] * 8, 2, decay=0.5, decay_per="epoch", pilot_share=0.0)
    alloc.alpha[:] = 5.0
    alloc.start_step(0)
    np.testing.assert_allclose(alloc.alpha, 1.0 + 4.0 * 0.5**0.25)


def test_diverse_carry_preset_is_the_recorded_variant() -> None:
    alloc, _ = make([[1.0, 0.0]] * 8, 4, preset="diverse-carry")
    cfg = alloc.config
    assert (cfg.advantage, cfg.saturation_n, cfg.pilot_share) == ("baseline", 8.0, 0.0)
    assert (cfg.decay_per, cfg.saturation_carry) == ("epoch", 1.0)


def test_explore_share_pilots_the_next_prompts_of_the_epoch_order() -> None:
    # 8 prompts; prompts 0..3 carry a mixed history and outrank the never-seen ones, so the
    # ranking alone pilots only them; half the pilots walk the epoch order instead
    patterns = [[1.0, 0.0]] * 8
    ranked, _ = make(patterns, 16, pilot_share=0.5, n_pilot=2, decay=1.0)
    explore, _ = make(patterns, 16, pilot_share=0.5, n_pilot=2, decay=1.0, explore_share=0.5)
    for alloc in (ranked, explore):
        alloc.alpha[:4] = 2.0
        alloc.beta[:4] = 2.0  # Beta(2, 2): evidence 2 < min_evidence, a likely mixed pilot
        alloc.start_step(0)
    assert sorted(ranked.ask().prompt_ids) == [0, 1, 2, 3]
    fresh, _ = make(patterns, 16, pilot_share=0.5, n_pilot=2, decay=1.0, explore_share=0.5)
    expected = fresh.source.take(2)  # the epoch order the allocator reads (same seed)
    asked = explore.ask().prompt_ids
    assert asked[:2] == expected  # int(0.5 * 16) // 2 = 4 pilots: 2 explored, then 2 ranked
    assert set(asked[2:]) <= {0, 1, 2, 3} and not set(asked[2:]) & set(expected)
    assert len(set(asked)) == 4  # no prompt twice


def test_trained_keep_decays_the_evidence_of_trained_prompts_only() -> None:
    patterns = [[1.0, 0.0]] * 4 + [[1.0]] * 4  # prompts 4..7 never vary: never trained
    alloc, backend = make(patterns, 16, pilot_share=0.0, decay=1.0, trained_keep=0.25, n_max=4)
    alloc.alpha[4:] = 9.0  # known all-correct, outside the commit's choice
    groups = drive_step(alloc, backend, 0)
    trained = {g.prompt_id for g in groups}
    assert trained and trained <= {0, 1, 2, 3}
    for g in groups:  # its step's rollouts, then a quarter of the evidence kept
        wins = float(np.clip(g.rewards, 0, 1).sum())
        assert alloc.alpha[g.prompt_id] == pytest.approx(1.0 + 0.25 * wins)
        assert alloc.beta[g.prompt_id] == pytest.approx(1.0 + 0.25 * (g.size - wins))
    np.testing.assert_array_equal(alloc.alpha[4:], 9.0)


def test_explore_keep_preset_is_the_evaluated_variant() -> None:
    # the knobs that ran in experiments/suite-sim.yaml as bb-explore-keep (docs/suite.md)
    alloc, _ = make([[1.0, 0.0]] * 8, 16, preset="explore-keep")
    assert (alloc.config.explore_share, alloc.config.trained_keep) == (0.5, 0.5)
    assert alloc.config.pilot_share == BayesBudgetConfig().pilot_share > 0  # pilots to share
