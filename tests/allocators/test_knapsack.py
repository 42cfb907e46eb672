"""Knapsack RL: the fast DP against the official code, its transcription and brute force;
hand-computed allocations; the allocator's estimates and steps."""

from __future__ import annotations

import contextlib
import io
import itertools
import json
import math
from pathlib import Path

import numpy as np
import pytest

from rollcli.allocators import create_allocator
from rollcli.allocators.knapsack_dp import full_dp, gain_table, knapsack_budget, solve_dp
from rollcli.testing import ScriptedBackend, drive_step
from tests.allocators import knapsack_official as official

FIXTURE = Path(__file__).parents[1] / "fixtures" / "knapsack_official.json"


def run_official(states, *, n, min_n=2, max_n=128, arithmetic="numpy", **knobs):
    official.NUMBA_AVAILABLE = arithmetic == "numba"
    with contextlib.redirect_stdout(io.StringIO()):
        budget, _ = official.sampling_budget_by_knapsack(
            np.array(states, dtype=object), n=n, min_n=min_n, max_n=max_n, **knobs
        )
    return [int(b) for b in budget]


def run_ours(states, *, n, min_n=2, max_n=128, arithmetic="numpy", **knobs):
    s = np.array(states, dtype=float).reshape(-1, 3)
    return knapsack_budget(
        s[:, 1], s[:, 0] == 1, n=n, min_n=min_n, max_n=max_n, arithmetic=arithmetic, **knobs
    ).budget.tolist()


def random_states(rng, size, *, ties=True, unready=0.2):
    """reward_states rows [ready, p, count]: p = k/m (ties) or any, some at 0/1, some unready."""
    rows = []
    for _ in range(size):
        r = rng.random()
        if r < unready:
            rows.append([0, 0.0, int(rng.integers(0, 8))])
        elif r < unready + 0.1:
            rows.append([1, float(rng.choice([0.0, 1.0])), 16])
        elif ties:
            m = int(rng.choice([4, 8, 16]))
            rows.append([1, int(rng.integers(1, m)) / m, m])
        else:
            rows.append([1, float(rng.uniform(0.02, 0.98)), 16])
    return rows


# -- the official code, run in the environment it pins -------------------------------------------


def test_matches_the_official_code_run_under_numpy1_and_numba() -> None:
    data = json.loads(FIXTURE.read_text())
    assert len(data["cases"]) >= 16
    for case in data["cases"]:
        s = np.array(case["reward_states"], dtype=float)
        result = knapsack_budget(
            s[:, 1],
            s[:, 0] == 1,
            n=case["n"],
            min_n=case["min_n"],
            max_n=case["max_n"],
            arithmetic="numba" if case["numba"] else "numpy",
        )
        assert result.budget.tolist() == case["budget"], (len(s), case["numba"])
        assert result.fallback == case["fallback"]


# -- the transcription ---------------------------------------------------------------------------


@pytest.mark.filterwarnings("ignore:divide by zero")
@pytest.mark.parametrize("seed", range(40))
def test_matches_the_transcription_on_random_batches(seed: int) -> None:
    rng = np.random.default_rng(seed)
    size = int(rng.integers(2, 14))
    n = int(rng.choice([4, 6, 8]))
    max_n = int(rng.choice([6, 10, 16]))
    min_n = int(rng.choice([1, 2]))
    states = random_states(rng, size, ties=seed % 3 != 0)
    knobs = {"alpha": float(rng.choice([0.5, 0.9])), "cost_estimation": "probability"}
    if seed % 5 == 0:
        knobs["cost_estimation"] = "expectation"
    if seed % 7 == 0:
        knobs["allow_fallback"] = False
    ours = run_ours(states, n=n, min_n=min_n, max_n=max_n, **knobs)
    try:
        want = run_official(states, n=n, min_n=min_n, max_n=max_n, **knobs)
    except AssertionError:
        # the official's fallback found no prompt to take the excess (tested on its own below)
        assert all(row[0] == 1 and 0 < row[1] < 1 for row in states) and sum(ours) == size * n
        return
    assert ours == want


@pytest.mark.parametrize("seed", range(2))
def test_matches_the_transcription_of_the_numba_kernel(seed: int) -> None:
    # items * budget * (max_n - min_n) > 50,000: the official runs its numba kernel
    rng = np.random.default_rng(100 + seed)
    states = [[1, int(rng.integers(1, 16)) / 16, 16] for _ in range(12)]
    want = run_official(states, n=9, max_n=64, arithmetic="numba")
    assert run_ours(states, n=9, max_n=64, arithmetic="numba") == want
    # and the two official code paths really round differently (so the knob matters)
    g_numba = gain_table(np.float32([0.3]), min_n=2, num_extra=62, arithmetic="numba")
    g_numpy = gain_table(np.float32([0.3]), min_n=2, num_extra=62, arithmetic="numpy")
    assert not np.array_equal(g_numba, g_numpy)


def test_the_vectorised_reference_is_the_transcription() -> None:
    rng = np.random.default_rng(5)
    for _ in range(10):
        p = rng.choice([0.25, 0.5, 0.75, 0.125, 0.3], size=6).astype(np.float32)
        budget = int(rng.integers(1, 6 * 8))
        g = gain_table(p, min_n=2, num_extra=8)
        official.NUMBA_AVAILABLE = False
        want = official.solve_by_dp(p, list(range(6)), 2, 8, budget)
        assert full_dp(g, budget).tolist() == want.tolist()


@pytest.mark.parametrize("ties", [True, False])
def test_matches_the_full_dp_at_scale(ties: bool) -> None:
    rng = np.random.default_rng(7)
    p = rng.integers(1, 16, size=160) / 16 if ties else rng.uniform(0.01, 0.99, size=160)
    p32 = p.astype(np.float32)
    for budget in (480, 961):
        g = gain_table(p32, min_n=2, num_extra=126)
        want = full_dp(g, budget)
        assert solve_dp(p32, min_n=2, num_extra=126, budget=budget).tolist() == want.tolist()


def test_identical_prompts_follow_the_official_rounding() -> None:
    # 40 prompts with one p: every split of the budget is exactly as good; the official picks
    # one by the rounding of its running sums, and so must we
    p32 = np.full(40, 0.5, dtype=np.float32)
    g = gain_table(p32, min_n=2, num_extra=126)
    for budget in (50, 97, 130):
        got = solve_dp(p32, min_n=2, num_extra=126, budget=budget)
        assert got.tolist() == full_dp(g, budget).tolist()
        assert got.sum() == budget and got.max() - got.min() <= 1


# -- brute force ----------------------------------------------------------------------------------


@pytest.mark.parametrize("seed", range(12))
def test_dp_answer_is_optimal_by_brute_force(seed: int) -> None:
    rng = np.random.default_rng(50 + seed)
    items, num_extra = int(rng.integers(1, 5)), int(rng.integers(2, 6))
    p32 = rng.choice([0.1, 0.25, 0.5, 0.6, 0.9], size=items).astype(np.float32)
    budget = int(rng.integers(1, items * num_extra))
    got = solve_dp(p32, min_n=2, num_extra=num_extra, budget=budget)
    g = gain_table(p32, min_n=2, num_extra=num_extra)
    best = max(
        math.fsum(g[i, k] for i, k in enumerate(ks))
        for ks in itertools.product(range(num_extra + 1), repeat=items)
        if sum(ks) == budget
    )
    assert got.sum() == budget
    assert math.fsum(g[i, k] for i, k in enumerate(got)) >= best - 1e-15


# -- hand-computed allocations --------------------------------------------------------------------


def test_two_prompts_by_hand() -> None:
    # n=4, two prompts with p = 0.5 and 0.1: 2 each, 4 left for the DP (their costs 3 + 21 > 4).
    # g(k) = (1 - p^(k+2) - q^(k+2)) p q^2: splits (4,0) .1211 (3,1) .1391 (2,2) .1372 (1,3) .1269
    result = knapsack_budget(np.array([0.5, 0.1]), np.array([True, True]), n=4)
    assert result.budget.tolist() == [5, 3]
    assert (result.effective, result.dp_budget, result.fallback) == (2, 4, False)


def test_fallback_gives_the_excess_to_zero_and_unready_prompts() -> None:
    # A, B p=0.5, C p=0, D unready; n=8: 2+2+2+8 = 14, 18 left; costs 3+3 = 6 < 18: the excess
    # 12 goes to p=0 prompts, which in the official's float32 array include D (its entry is 0)
    states = [[1, 0.5, 16], [1, 0.5, 16], [1, 0.0, 16], [0, 0.0, 3]]
    assert run_ours(states, n=8) == run_official(states, n=8) == [5, 5, 8, 14]
    assert run_ours(states, n=8, excess_to_unready=False) == [5, 5, 14, 8]
    assert run_ours(states, n=8, allow_fallback=False) == [11, 11, 2, 8]


def test_no_prompt_to_take_the_excess_gives_it_to_the_dp() -> None:
    # costs 3 + 3 < 12 left and no prompt outside the DP: the official divides by zero (numpy
    # integers: 0 and a warning), drops the excess and fails its own budget check
    states = [[1, 0.5, 16], [1, 0.5, 16]]
    with pytest.warns(RuntimeWarning), pytest.raises(AssertionError):
        run_official(states, n=8)
    assert run_ours(states, n=8) == [8, 8]


def test_no_effective_prompt() -> None:
    assert run_ours([[1, 0.0, 16], [1, 1.0, 16], [1, 1.0, 16]], n=8) == [20, 2, 2]
    assert run_ours([[1, 1.0, 16], [1, 1.0, 16]], n=8) == [8, 8]  # official: uniform n
    assert run_ours([[0, 0.0, 0]] * 3, n=8) == [8, 8, 8]


def test_a_budget_past_every_prompts_max_is_spread_past_max_n() -> None:
    # p = 0.01: cost log(.1)/log(.99) = 229 -> capped 128 each, 256 >= 2 + 2 left... use 3 items
    p32 = np.float32([0.01, 0.01, 0.01])
    assert solve_dp(p32, min_n=2, num_extra=6, budget=20).tolist() == [7, 7, 6]


# -- the allocator ------------------------------------------------------------------------------


def test_estimates_follow_the_official_update() -> None:
    # one prompt per step; visits of 4 rollouts (< 16): p = mean of the last 16 rewards
    backend = ScriptedBackend([[1, 1, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1]])
    a = create_allocator(
        {"kind": "knapsack", "n": 4, "min_n": 2, "max_n": 8, "min_buffer_length": 8},
        num_prompts=1,
        rollouts_per_step=4,
        seed=0,
    )
    drive_step(a, backend, 0)
    assert a._p[0] == 0.5 and a._history.count(0) == 4
    drive_step(a, backend, 1)
    assert a._p[0] == 0.25  # [1,1,0,0, 0,0,0,0]
    drive_step(a, backend, 2)
    assert a._p[0] == 0.5  # the last 12 rewards: [1,1,0,0,0,0,0,0,1,1,1,1]
    b = create_allocator(
        {"kind": "knapsack", "n": 4, "max_n": 8, "estimate": "visit"},
        num_prompts=1,
        rollouts_per_step=4,
        seed=0,
    )
    backend = ScriptedBackend([[1, 1, 0, 0, 0, 0, 0, 0]])
    drive_step(b, backend, 0)
    drive_step(b, backend, 1)
    assert b._p[0] == 0.0  # the last visit alone


def test_steps_ask_what_the_knapsack_gives() -> None:
    # 2 prompts, n=4; step 0: both unready, 4 each; then p = 0.5 and 0.25 (ready at 4 rewards)
    backend = ScriptedBackend([[1, 0, 1, 0], [1, 0, 0, 0]])
    a = create_allocator(
        {"kind": "knapsack", "n": 4, "min_buffer_length": 4},
        num_prompts=2,
        rollouts_per_step=8,
        seed=0,
    )
    first = drive_step(a, backend, 0)
    assert sorted(g.size for g in first) == [4, 4]
    second = drive_step(a, backend, 1)
    sizes = {g.prompt_id: g.size for g in second}
    want = knapsack_budget(np.array([a._p[0], a._p[1]]), np.array([True, True]), n=4).budget
    assert [sizes[0], sizes[1]] == want.tolist() and sum(sizes.values()) == 8
    assert a.stats()["effective"] == 2 and a.ledger.step_trained_rollouts == 8


def test_config_errors_name_the_knob() -> None:
    for knobs, text in [
        ({"min_n": 9}, "min_n"),
        ({"max_n": 2}, "max_n"),
        ({"negative_n": 9}, "negative_n"),
        ({"alpha": 1.0}, "alpha"),
        ({"arithmetic": "cuda"}, "arithmetic"),
    ]:
        with pytest.raises(ValueError, match=text):
            create_allocator(
                {"kind": "knapsack", **knobs}, num_prompts=4, rollouts_per_step=16, seed=0
            )
    with pytest.raises(ValueError, match="not divisible by n=8"):
        create_allocator({"kind": "knapsack"}, num_prompts=4, rollouts_per_step=12, seed=0)


def test_paper_7b_rounds_as_the_published_runs_executed() -> None:
    """Issue 29, mend (b): the published 7B runs used vLLM, whose environment imports numba, and
    at 256 prompts x 8 even a one-prompt DP is past the official size switch, so they ran the
    numba kernel. The preset follows it; the defaults keep the numpy loop (earlier results)."""
    from rollcli.allocators import create_config
    from rollcli.allocators.knapsack_dp import _NUMBA_MIN_WORK

    paper = create_config({"kind": "knapsack", "preset": "paper-7b"})
    assert paper.arithmetic == "numba"
    smallest_dp = 1 * (256 * paper.n - 256 * paper.min_n) * (paper.max_n - paper.min_n)
    assert smallest_dp > _NUMBA_MIN_WORK
    assert create_config({"kind": "knapsack", "preset": "paper-7b-numba"}) == paper
    assert create_config({"kind": "knapsack", "preset": "paper-7b-numpy"}).arithmetic == "numpy"
    assert create_config({"kind": "knapsack"}).arithmetic == "numpy"
