"""VIGOR on hand-computed cases: batch size from the budget, rounds, kept sets, unequal groups."""

from __future__ import annotations

import pytest

from rollcli.allocators import create_allocator
from rollcli.allocators.vigor import VigorConfig, vigor_round_sizes, vigor_step_cost
from rollcli.testing import ScriptedBackend

from .conftest import epoch_order, scripted_by_position

# Rewards by epoch-0 position; round 0 gives 2 rollouts each, so the first two decide round 0.
PATTERNS = [
    [1.0],  # o0: always right, var 0
    [1, 0],  # o1: var .25 at every even count
    [0.0],  # o2: var 0
    [0, 1],  # o3: var .25 at every even count
    [1, 0, 0, 0],  # o4: round 0 var .25; after 6 rollouts (1,0,0,0,1,0) var 2/9
    [1, 1, 0, 0],  # o5: round 0 [1,1] var 0
    [0, 1, 1, 1],  # o6: round 0 var .25; after 6 rollouts var 2/9
    [1, 1, 1, 0],  # o7: round 0 [1,1] var 0
]
THIRDPARTY = {"kind": "vigor", "m0": 2, "alpha": 0.5, "gamma": 2, "rounds": 4, "tie_break": "first"}


def test_batch_size_follows_the_budget() -> None:
    config = VigorConfig(m0=2, alpha=0.5, gamma=2.0, rounds=4)
    assert vigor_round_sizes(config, 8) == [8, 4, 2, 1]
    assert vigor_step_cost(config, 8) == 8 * 2 + 4 * 4 + 2 * 8 + 1 * 16 == 64  # T * m0 * N
    assert vigor_round_sizes(config, 3) == [3, 2, 1, 1]  # ceil keeps one prompt to the end
    assert vigor_step_cost(config, 3) == 38
    sizes = {
        r: create_allocator(THIRDPARTY, num_prompts=64, rollouts_per_step=r, seed=0).batch_prompts
        for r in (32, 64, 512)
    }
    assert sizes == {32: 2, 64: 8, 512: 64}
    odd = VigorConfig(m0=3, alpha=0.7, gamma=1.5, rounds=4)
    assert odd.rollouts_per_round() == [3, 5, 7, 10]  # 4.5 -> 5, 6.75 -> 7, 10.125 -> 10
    with pytest.raises(ValueError, match="more than rollouts_per_step"):
        create_allocator(THIRDPARTY, num_prompts=64, rollouts_per_step=16, seed=0)


def test_rounds_keep_the_highest_accumulated_variance(make) -> None:
    o = epoch_order(16, 0)
    run = make(THIRDPARTY, scripted_by_position(o, PATTERNS + [[1.0]] * 8), 64)
    groups = run.step(0)
    assert run.asks == [
        [(o[i], 2, "round0") for i in range(8)],
        # var .25: o1, o3, o4, o6 (ties in batch order); keep ceil(8/2) = 4
        [(o[1], 4, "round1"), (o[3], 4, "round1"), (o[4], 4, "round1"), (o[6], 4, "round1")],
        # after 6 rollouts: o1, o3 .25; o4, o6 2/9 -> keep 2
        [(o[1], 8, "round2"), (o[3], 8, "round2")],
        # after 14: both .25, tie -> the first
        [(o[1], 16, "round3")],
    ]
    assert [(g.prompt_id, g.size) for g in groups] == [
        (o[0], 2), (o[1], 30), (o[2], 2), (o[3], 14), (o[4], 6), (o[5], 2), (o[6], 6), (o[7], 2)
    ]  # fmt: skip
    assert groups[1].rewards.tolist() == [1, 0] * 15
    assert run.allocator.ledger.step_rollouts == 64
    stats = run.allocator.stats()
    assert (stats["rounds"], stats["kept"], stats["dropped"], stats["batch_prompts"]) == (
        4,
        1,
        7,
        8,
    )


def test_train_dropped_false_trains_only_the_kept(make) -> None:
    o = epoch_order(16, 0)
    run = make(
        {**THIRDPARTY, "train_dropped": False}, scripted_by_position(o, PATTERNS + [[1.0]] * 8), 64
    )
    groups = run.step(0)
    assert [(g.prompt_id, g.size) for g in groups] == [(o[1], 30)]


def test_random_tie_break_is_seeded_and_keeps_the_sizes(make) -> None:
    kept = []
    for seed in (0, 0, 1, 2, 3):
        backend = ScriptedBackend([[1, 0]] * 16)  # every prompt ties at .25
        run = make({**THIRDPARTY, "tie_break": "random"}, backend, 64, seed)
        run.step(0)
        assert [len(a) for a in run.asks] == [8, 4, 2, 1]
        kept.append(run.asks[-1][0][0])
    assert kept[0] == kept[1]
    assert len(set(kept)) > 1


@pytest.mark.parametrize(("all_zero", "rollouts", "rounds"), [("stop", 16, 1), ("continue", 64, 4)])
def test_all_zero_variance(make, all_zero: str, rollouts: int, rounds: int) -> None:
    run = make({**THIRDPARTY, "all_zero": all_zero}, ScriptedBackend([[1.0]] * 16), 64)
    groups = run.step(0)
    assert run.allocator.ledger.step_rollouts == rollouts and len(run.asks) == rounds
    assert len(groups) == 8  # train_dropped: every prompt's rollouts form a group
    assert run.allocator.stats()["all_zero_stop"] == int(all_zero == "stop")


def test_batch_size_without_halving() -> None:
    # rounds=2, m0=2, gamma=4, alpha=1: cost(N) = 2N + 8N; budget 25 -> N=2 (cost 20)
    a = create_allocator(
        {"kind": "vigor", "m0": 2, "alpha": 1.0, "gamma": 4.0, "rounds": 2},
        num_prompts=8,
        rollouts_per_step=25,
        seed=0,
    )
    assert a.batch_prompts == 2
    assert a.max_step_rollouts == 25


@pytest.mark.parametrize(
    ("knobs", "match"),
    [({"alpha": 0}, "alpha"), ({"rounds": 0}, "rounds"), ({"m0": 0}, "m0"), ({"tie_break": "last"}, "tie_break"),
     ({"all_zero": "skip"}, "all_zero"), ({"m0": 1, "gamma": 0.2}, "rounds to 0")],
)  # fmt: skip
def test_config_errors_name_the_knob(knobs, match) -> None:
    with pytest.raises(ValueError, match=match):
        create_allocator({"kind": "vigor", **knobs}, num_prompts=8, rollouts_per_step=64, seed=0)


def test_equal_variances_tie_on_the_tie_key_not_on_float_rounding(make) -> None:
    # N = 4, rounds 2/4/8 rollouts, keep 2 then 1 (cost 8 + 8 + 8 = 24). Round 0: all zero ->
    # the first two. After 6 rollouts o0 has 000010, o1 000100: both 1 of 6, variance 5/36, but
    # np.var gives 0.1388888888888889 and 0.13888888888888892. tie_break first keeps o0.
    o = epoch_order(4, 0)
    patterns = [[0, 0, 0, 0, 1, 0], [0, 0, 0, 1, 0, 0], [0.0], [0.0]]
    config = {**THIRDPARTY, "rounds": 3}
    run = make(config, scripted_by_position(o, patterns), 24)
    assert run.allocator.batch_prompts == 4
    run.step(0)
    assert run.asks[1:] == [[(o[0], 4, "round1"), (o[1], 4, "round1")], [(o[0], 8, "round2")]]
    # the same holds between k and n - k successes (equal variance): 5 of 6 ties with 1 of 6
    patterns = [[1, 1, 1, 1, 1, 0], [0, 0, 0, 1, 0, 0], [0.0], [0.0]]
    run = make(config, scripted_by_position(o, patterns), 24)
    run.step(0)
    assert run.asks[-1] == [(o[0], 8, "round2")]
