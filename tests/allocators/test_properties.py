"""Hypothesis over allocator configurations: the contract's invariants hold for any valid knobs."""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rollcli.allocators._common import reward_variance
from rollcli.allocators.vigor import VigorConfig, vigor_step_cost
from rollcli.testing.allocator_contract import ContractCase, ContractRun, assert_round_trip

SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def pilot_commit_cases(draw: st.DrawFn) -> ContractCase:
    n_pilot, n_commit = draw(st.integers(1, 6)), draw(st.integers(1, 6))
    p_lower = draw(st.sampled_from([0.0, 0.125, 0.25, 0.5]))
    p_upper = draw(st.sampled_from([x for x in (0.5, 0.75, 0.9, 1.0) if x >= p_lower]))
    config = {
        "kind": "pilot_commit",
        "n_pilot": n_pilot,
        "n_commit": n_commit,
        "p_lower": p_lower,
        "p_upper": p_upper,
        "evict_at": None if p_upper == 1.0 else draw(st.sampled_from([None, 1.0])),
        "evict_consecutive": draw(st.integers(1, 3)),
        "pilot_batch_factor": draw(st.integers(1, 3)),
        "bind": draw(st.booleans()),
        "replay": {
            "max_age": draw(st.integers(0, 3)),
            "order": draw(st.sampled_from(["max_variance", "random", "fifo"])),
            "flush_at_epoch_end": draw(st.booleans()),
        },
        "max_rounds": draw(st.integers(1, 4)),
        "on_max_rounds": "stop",
    }
    batch = draw(st.integers(1, 4))
    return ContractCase(
        config, batch * (n_pilot + n_commit), num_prompts=draw(st.integers(4, 40)), steps=5
    )


@st.composite
def vigor_cases(draw: st.DrawFn) -> ContractCase:
    config = {
        "kind": "vigor",
        "m0": draw(st.integers(1, 3)),
        "alpha": draw(st.sampled_from([0.25, 0.5, 0.7, 1.0])),
        "gamma": draw(st.sampled_from([1.0, 1.5, 2.0, 3.0])),
        "rounds": draw(st.integers(1, 4)),
        "train_dropped": draw(st.booleans()),
        "tie_break": draw(st.sampled_from(["random", "first"])),
        "all_zero": draw(st.sampled_from(["continue", "stop"])),
    }
    floor = vigor_step_cost(VigorConfig(**{k: v for k, v in config.items() if k != "kind"}), 1)
    budget = draw(st.integers(floor, floor + 60))
    return ContractCase(config, budget, num_prompts=draw(st.integers(2, 40)), steps=4)


@st.composite
def dynamic_cases(draw: st.DrawFn) -> ContractCase:
    n = draw(st.integers(2, 6))
    config = {
        "kind": "dynamic",
        "n": n,
        "gen_batch_factor": draw(st.integers(1, 3)),
        "max_gen_batches": draw(st.integers(1, 4)),
        "on_max_gen_batches": "train",
    }
    return ContractCase(
        config, n * draw(st.integers(1, 4)), num_prompts=draw(st.integers(2, 40)), steps=4
    )


def _check(case: ContractCase) -> None:
    run = ContractRun(case, seed=0).run()
    run.check_deferred_returned()


@SETTINGS
@given(pilot_commit_cases(), st.integers(1, 60))
def test_pilot_commit_invariants(case: ContractCase, cut: int) -> None:
    _check(case)
    assert_round_trip(case, 0, [cut])
    run = ContractRun(case, seed=0).run()
    size = case.config["n_pilot"] + case.config["n_commit"]
    batch = case.rollouts_per_step // size
    for event in run.trace:
        if event[0] == "groups":
            assert len(event[1]) <= batch and all(len(refs) == size for _, refs in event[1])


@SETTINGS
@given(vigor_cases(), st.integers(1, 40))
def test_vigor_invariants(case: ContractCase, cut: int) -> None:
    _check(case)
    assert_round_trip(case, 0, [cut])
    run = ContractRun(case, seed=0).run()
    for event in run.trace:
        if event[0] == "stats":
            stats = dict(event[1])
            assert stats["rounds"] <= case.config["rounds"]


@SETTINGS
@given(dynamic_cases(), st.integers(1, 40))
def test_dynamic_invariants(case: ContractCase, cut: int) -> None:
    _check(case)
    assert_round_trip(case, 0, [cut])
    run = ContractRun(case, seed=0).run()
    batch = case.rollouts_per_step // case.config["n"]
    for event in run.trace:
        if event[0] == "groups":
            assert len(event[1]) <= batch


@SETTINGS
@given(
    st.lists(st.sampled_from([0.0, 1.0]), min_size=1, max_size=64),
    st.randoms(use_true_random=False),
)
def test_reward_variance_ignores_order_and_mirrors(rewards: list[float], rnd) -> None:
    r = np.array(rewards)
    shuffled = r.copy()
    rnd.shuffle(shuffled)
    k, n = int(r.sum()), r.size
    assert reward_variance(r) == reward_variance(shuffled) == reward_variance(1 - r)
    assert reward_variance(r) == k * (n - k) / n**2
    assert abs(reward_variance(r) - float(np.var(r))) < 1e-15
    noisy = r * 0.3 + 0.1  # not integer: sorted np.var, order-free
    assert reward_variance(noisy) == reward_variance(noisy[::-1])
