"""Pilot-Commit on hand-computed cases: filtering, binding, replay order and age, eviction."""

from __future__ import annotations

import numpy as np
import pytest

from rollcli.allocators import AllocatorError, create_allocator
from rollcli.allocators.api import Outcome
from rollcli.allocators.pilot_commit import _Entry
from rollcli.testing import FakeBackend, ScriptedBackend

from .conftest import epoch_order, scripted_by_position

SEED = 0
# n_pilot = n_commit = 8, rollouts_per_step 32 -> B = 2 prompts; pilot_batch_factor 2 -> 4 pilots.
BASE = {"kind": "pilot_commit", "n_pilot": 8, "n_commit": 8, "pilot_batch_factor": 2}
ONES, ZEROS = [1.0] * 8, [0.0] * 8
# Pilot results by epoch-0 position (8 rollouts each, repeated for the commit):
PATTERNS = [
    ONES,  # o0: p_hat 1      -> evicted
    ZEROS,  # o1: p_hat 0      -> too hard, deferred
    [1, 0] * 4,  # o2: p_hat .5     -> survives, std .5
    [1, 1, 1, 0] * 2,  # o3: p_hat .75    -> survives (p_upper inclusive), std .433
    [1, 0, 0, 0, 0, 0, 0, 0],  # o4: p_hat .125 -> survives (p_lower inclusive), std .331
    [1, 1, 1, 1, 1, 1, 1, 0],  # o5: p_hat .875 -> too easy but not perfect, deferred
    [0, 0, 1, 0] * 2,  # o6: p_hat .25    -> survives, std .433
    [1, 0, 1, 1] * 2,  # o7: p_hat .75    -> survives, std .433
]


@pytest.fixture
def order() -> list[int]:
    return epoch_order(8, SEED)


def test_bound_rounds_filter_commit_and_flush(make, order) -> None:
    o = order
    run = make(BASE, scripted_by_position(o, PATTERNS), 32, SEED)
    a = run.allocator
    assert (a.batch_prompts, a.pilot_batch_prompts) == (2, 4)

    groups = run.step(0)
    # round 1: pilots only; round 2: commits of round 1's survivors bound with the next pilots
    assert run.asks == [
        [(o[i], 8, "pilot") for i in range(4)],
        [(o[2], 8, "commit"), (o[3], 8, "commit")] + [(o[i], 8, "pilot") for i in range(4, 8)],
    ]
    assert [g.prompt_id for g in groups] == [o[2], o[3]]
    assert [g.size for g in groups] == [16, 16]
    assert groups[0].rewards.tolist() == [1, 0] * 8  # pilot then commit rollouts, one group
    assert a.source.is_evicted(o[0]) and not a.source.is_evicted(o[5])
    assert sorted(a.source.state_dict()["deferred"]) == sorted([o[1], o[5]])
    stats = a.stats()
    assert (stats["rounds"], stats["piloted"], stats["survived"]) == (2, 8, 5)
    assert (stats["too_hard"], stats["too_easy"], stats["evicted_now"]) == (1, 1, 1)
    assert stats["buffer_size"] == 3  # o4, o6, o7 wait for step 1
    # the buffered pilots are live: the backend must keep them
    assert a.live_refs() == {r for e in a._buffer.values() for r in e.pilot.refs}
    assert len(a.live_refs()) == 24

    groups = run.step(1)
    # max_variance: o6 and o7 tie on std .433 and step 0 -> insertion order; o4 (std .331) waits.
    # The pilots roll the epoch over (8 prompts used): the buffer (o4) is flushed.
    commits = [(p, n, ph) for p, n, ph in run.asks[0] if ph == "commit"]
    assert commits == [(o[6], 8, "commit"), (o[7], 8, "commit")]
    assert len(run.asks) == 1
    # deferred o1, o5 are back; evicted o0 is not; o6, o7 (being committed) are skipped as pilots
    new_epoch = [p for p in epoch_order(8, SEED, epoch=1) if p not in (o[0], o[6], o[7])]
    pilots = [p for p, _, ph in run.asks[0] if ph == "pilot"]
    assert pilots == new_epoch[:4]
    assert a.stats()["skipped_busy"] == 2
    assert [g.prompt_id for g in groups] == [o[6], o[7]]
    assert a.stats()["flushed"] == 1 and a.source.epoch == 1


def test_sequential_mode_pilots_then_commits(make, order) -> None:
    o = order
    run = make({**BASE, "bind": False}, scripted_by_position(o, PATTERNS), 32, SEED)
    groups = run.step(0)
    assert run.asks == [
        [(o[i], 8, "pilot") for i in range(4)],
        [(o[2], 8, "commit"), (o[3], 8, "commit")],
    ]
    assert [g.prompt_id for g in groups] == [o[2], o[3]]
    groups = run.step(1)
    assert run.asks == [
        [(o[i], 8, "pilot") for i in range(4, 8)],
        [(o[6], 8, "commit"), (o[7], 8, "commit")],
    ]
    assert run.allocator.stats()["buffer_size"] == 1  # o4 stays for later


def test_fifo_order_commits_oldest_first(make, order) -> None:
    o = order
    run = make({**BASE, "replay": {"order": "fifo"}}, scripted_by_position(o, PATTERNS), 32, SEED)
    run.step(0)
    run.step(1)
    assert [(p, ph) for p, _, ph in run.asks[0] if ph == "commit"] == [
        (o[4], "commit"),
        (o[6], "commit"),
    ]


def test_replay_max_age_drops_stale_survivors(make, order) -> None:
    o = order
    run = make({**BASE, "replay": {"max_age": 0}}, scripted_by_position(o, PATTERNS), 32, SEED)
    run.step(0)
    run.step(1)
    # o4, o6, o7 were piloted at step 0: age 1 > 0 at step 1, dropped before selection
    assert run.allocator.stats()["aged_out"] == 3
    assert not [x for x in run.asks[0] if x[2] == "commit"]


def _entry(prompt: int, rewards: list[float], step: int, seq: int) -> _Entry:
    n = len(rewards)
    outcome = Outcome(
        prompt, "pilot", np.array(rewards, float), np.ones(n, int), 0, tuple(range(n))
    )
    return _Entry(outcome, step, seq)


@pytest.mark.parametrize(
    ("order", "expected"),
    [("max_variance", [3, 1, 2, 4]), ("fifo", [1, 4, 2, 3])],
)
def test_replay_order_with_newer_first_ties(order: str, expected: list[int]) -> None:
    a = create_allocator(
        {**BASE, "replay": {"order": order, "max_age": 10}},
        num_prompts=8,
        rollouts_per_step=32,
        seed=0,
    )
    a.step = 5
    a._buffer = {
        1: _entry(1, [1, 0, 1, 0], step=1, seq=0),  # std .5, old
        4: _entry(4, [1, 1, 1, 0], step=1, seq=1),  # std .433, old
        2: _entry(2, [1, 1, 1, 0], step=3, seq=2),  # std .433, newer
        3: _entry(3, [0, 1, 0, 1], step=3, seq=3),  # std .5, newer -> first under max_variance
    }
    assert a._select_commits(4) == expected
    assert sorted(a._committing) == [1, 2, 3, 4] and not a._buffer


def test_random_order_is_seeded() -> None:
    picks = []
    for seed in (0, 0, 1):
        a = create_allocator(
            {**BASE, "replay": {"order": "random"}}, num_prompts=8, rollouts_per_step=32, seed=seed
        )
        a._buffer = {p: _entry(p, [1, 0], 0, p) for p in range(8)}
        picks.append(a._select_commits(3))
    assert picks[0] == picks[1] and len(set(picks[0])) == 3
    assert picks[0] != picks[2]


def test_eviction_needs_consecutive_evidence(make) -> None:
    # 4 prompts, all solved every time: with evict_consecutive=2 the first epoch only defers them
    backend = ScriptedBackend([ONES] * 4)
    run = make(
        {**BASE, "evict_consecutive": 2, "on_max_rounds": "stop", "max_rounds": 1}, backend, 32
    )
    a = run.allocator
    assert run.step(0) == []
    assert a.source.num_evicted == 0 and a.source.num_deferred == 4
    run.step(1)  # next epoch: second perfect pilot -> evicted
    assert a.source.num_evicted == 4
    assert run.step(2) == [] and run.asks == []  # pool empty: nothing asked, no error


def test_eviction_streak_resets_on_a_miss(make) -> None:
    # prompt 0 is perfect, then 7/8, then perfect: never two perfect pilots in a row
    backend = ScriptedBackend([ONES + [1] * 7 + [0] + ONES])
    run = make(
        {**BASE, "evict_consecutive": 2, "max_rounds": 1, "on_max_rounds": "stop"}, backend, 32
    )
    for step in range(3):
        run.step(step)
    assert run.allocator.source.num_evicted == 0
    run.step(3)  # the pattern restarts with a perfect pilot: streak 2 -> evicted
    assert run.allocator.source.num_evicted == 1


def test_max_rounds_error_and_stop(make) -> None:
    backend = FakeBackend(np.zeros(64), seed=0)  # nothing ever survives
    run = make({**BASE, "max_rounds": 3}, backend, 32)
    with pytest.raises(AllocatorError, match="after 3 rounds"):
        run.step(0)
    run = make({**BASE, "max_rounds": 3, "on_max_rounds": "stop"}, FakeBackend(np.zeros(64), 0), 32)
    assert run.step(0) == []
    assert run.allocator.ledger.step_rollouts == 3 * 4 * 8


def test_budget_must_divide() -> None:
    with pytest.raises(ValueError, match="n_pilot \\+ n_commit"):
        create_allocator(BASE, num_prompts=8, rollouts_per_step=30, seed=0)


@pytest.mark.parametrize(
    ("knobs", "match"),
    [
        ({"p_lower": 0.8}, "p_lower"),
        ({"evict_at": 0.5}, "evict_at"),
        ({"evict_consecutive": 0}, "evict_consecutive"),
        ({"replay": {"order": "lifo"}}, "replay.order"),
        ({"replay": {"max_agee": 3}}, "Did you mean 'max_age'"),
        ({"on_max_rounds": "retry"}, "on_max_rounds"),
    ],
)
def test_config_errors_name_the_knob(knobs, match) -> None:
    with pytest.raises(ValueError, match=match):
        create_allocator({**BASE, **knobs}, num_prompts=8, rollouts_per_step=32, seed=0)


def test_max_variance_ties_do_not_depend_on_reward_order() -> None:
    # Every entry has p_hat 1/6 or 5/6: the same std sqrt(5/36). np.std of these orders differs in
    # the last bit (0.1388888888888889 vs ...892 as variances), which must not decide the order:
    # newer step first, then insertion order.
    a = create_allocator(
        {**BASE, "n_pilot": 6, "n_commit": 2}, num_prompts=8, rollouts_per_step=8, seed=0
    )
    a.step = 3
    a._buffer = {
        1: _entry(1, [0, 0, 0, 0, 1, 0], step=2, seq=0),
        2: _entry(2, [0, 0, 0, 1, 0, 0], step=2, seq=1),
        3: _entry(3, [1, 1, 1, 0, 1, 1], step=2, seq=2),  # 5 of 6: same std as 1 of 6
        4: _entry(4, [0, 1, 1, 1, 1, 1], step=3, seq=3),  # newer: first
    }
    assert len({e.std for e in a._buffer.values()}) == 1
    assert a._select_commits(4) == [4, 1, 2, 3]


@pytest.mark.parametrize("preset", ["paper-1.5b", "paper-4b"])
def test_published_presets_commit_up_to_five_steps_after_the_pilot(preset: str) -> None:
    # the official flush after each trained step deletes entries with step - added > 4: an entry
    # piloted at step s is still there during step s + 5
    a = create_allocator(
        {"kind": "pilot_commit", "preset": preset},
        num_prompts=4096,
        rollouts_per_step=16384,
        seed=0,
    )
    assert a.config.replay.max_age == 5
    for age, committed in [(5, [7]), (6, [])]:
        a._buffer = {7: _entry(7, [1, 0] * 16, step=10, seq=0)}
        a.step = 10 + age
        assert a._select_commits(1) == committed


# epoch-0 positions 0..3, 2 pilots a round (B = 2): o0 survives, the rest fail their first
# pilot and survive the next (patterns repeat per prompt over the rollouts drawn). Rounds 1-2
# use up epoch 0 with o0 committed.
RESET = {"kind": "pilot_commit", "n_pilot": 2, "n_commit": 2, "pilot_batch_factor": 1,
         "max_rounds": 3, "epoch_resets_rounds": True}  # fmt: skip
LATER = [[1, 0], [0, 0, 1, 0], [0, 0, 1, 0], [0, 0, 1, 0]]


def test_an_epoch_end_restarts_the_round_limit(make) -> None:
    o = epoch_order(4, SEED)
    run = make(RESET, scripted_by_position(o, LATER), 8, SEED)
    groups = run.step(0)
    # round 2 (< max_rounds) ends epoch 0; the round that starts epoch 1 counts from 1 again
    s = run.allocator.stats()
    assert len(groups) == 2 and s["rounds_reset"] == 1 and s["total_rounds"] > 3
    assert s["rounds"] == s["total_rounds"] - 2
    run = make({**RESET, "epoch_resets_rounds": False}, scripted_by_position(o, LATER), 8, SEED)
    with pytest.raises(AllocatorError, match="after 3 rounds"):
        run.step(0)


def test_a_max_rounds_round_that_ends_the_epoch_raises_as_the_official(make) -> None:
    """The official checks its round count right after each round (pc_ray_trainer.py, fit): when
    round max_rounds is the epoch's last and the batch is not full it raises; the count restarts
    only at an epoch end reached below max_rounds. (Issue 29, mend (a): rollcli ran one more.)"""
    o = epoch_order(4, SEED)
    run = make({**RESET, "max_rounds": 2}, scripted_by_position(o, LATER), 8, SEED)
    with pytest.raises(AllocatorError, match="after 2 rounds"):
        run.step(0)
    assert run.allocator.stats()["rounds_reset"] == 0
