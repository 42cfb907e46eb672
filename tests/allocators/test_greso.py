"""GRESO on hand-computed cases: skip probabilities, refill rounds, the last-round rule, adaptation."""

from __future__ import annotations

import numpy as np
import pytest

from rollcli.allocators import AllocatorError, create_allocator, create_config
from rollcli.allocators.greso import next_round_size, share32, skip_probabilities
from rollcli.testing import ScriptedBackend

from .conftest import epoch_order, scripted_by_position

ONES, ZEROS = [1.0] * 4, [0.0] * 4
# n = 4, rollouts_per_step = 16 -> B = 4; sampling_factor 1.5 -> rounds of at most 6 prompts;
# min_sampling_factor 0.25 -> at least 1.
BASE = {"kind": "greso", "n": 4, "sampling_factor": 1.5, "min_sampling_factor": 0.25}


def test_skip_probabilities_by_hand() -> None:
    easy = np.array([0, 1, 3, 10, 0, 0, 0])
    hard = np.array([0, 0, 0, 0, 1, 2, 700])
    got = skip_probabilities(easy, hard, 0.5, 0.8, 0.01)
    # 1 - max(0.5^c, 0.01): c=1 .5, c=3 .875, c=10 floor (0.5^10 < 0.01); hard 1 - 0.8^c
    assert got.tolist() == pytest.approx([0.0, 0.5, 0.875, 0.99, 0.2, 0.36, 0.99])
    assert skip_probabilities(easy, hard, 1.0, 1.0, 0.01).tolist() == [0.0] * 7


def test_next_round_size_by_hand() -> None:
    rule = {"n": 8, "max_round": 384, "min_round": 64, "margin": 1.25}
    # 256 groups missing at z = 0.5: 2048 / 0.5 / 8 * 1.25 = 640 > 384 -> a full round, not last
    assert next_round_size(2048, 0.5, **rule) == (384, False)
    # 64 groups missing: 512 / 0.5 / 8 * 1.25 = 160 -> the last round
    assert next_round_size(512, 0.5, **rule) == (160, True)
    # 8 groups missing at z = 0: 12.5 -> 12, raised to the floor of 64, still the last
    assert next_round_size(64, 0.0, **rule) == (64, True)
    # every group of the round had zero variance: the official code divides by zero; we refill
    assert next_round_size(64, 1.0, **rule) == (384, False)
    assert share32(4, 6) == float(np.float32(2 / 3)) != 2 / 3


def test_rounds_refill_until_the_batch_is_informative() -> None:
    order = epoch_order(12, 0)
    patterns = [ONES, ZEROS, [1, 0, 0, 0], [1, 1, 0, 0], ONES, ZEROS]  # round 1: 2 informative
    patterns += [[1, 0, 1, 0], [0, 1, 1, 1], [1, 1, 1, 0], ONES, ZEROS, [0, 0, 0, 1]]  # round 2: 4
    backend = scripted_by_position(order, patterns)
    a = create_allocator(BASE, num_prompts=12, rollouts_per_step=16, seed=0)
    assert (a.batch_prompts, a.max_round, a.min_round, a.max_step_rollouts) == (4, 6, 1, 240)

    a.start_step(0)
    asks = []
    while (ask := a.ask()) is not None:
        asks.append(ask.prompt_ids)
        a.tell(backend.generate(ask))
    # round 1: z = 4/6 -> int(8 / (1 - z) / 4 * 1.25) = 7 > 6: a second full round, not the last
    assert asks == [order[:6], order[6:]]
    groups = a.train_groups()
    # the first B informative groups train; positions 8 and 11 are surplus, dropped
    assert [g.prompt_id for g in groups] == [order[2], order[3], order[6], order[7]]
    stats = a.stats()
    assert (stats["rounds"], stats["drawn"], stats["rolled_out"]) == (2, 12, 12)
    assert (stats["informative"], stats["surplus"], stats["skipped_easy"]) == (6, 2, 0)
    # shares over the step's rolled-out groups: easy = all correct, hard = all wrong
    assert stats["easy_share"] == pytest.approx(3 / 12) and stats["hard_share"] == pytest.approx(
        3 / 12
    )
    assert (a.p_easy, a.p_hard) == (0.5, 0.5)  # still the first epoch: no adaptation

    # the trace: one all-correct entry -> skip 1 - 0.5, one all-wrong -> 1 - 0.5, else never
    probs = dict(zip(range(12), a.skip_probabilities(np.arange(12)).tolist(), strict=True))
    constant = {order[i] for i in (0, 1, 4, 5, 9, 10)}
    assert {p for p, q in probs.items() if q == 0.5} == constant
    assert all(q == 0.0 for p, q in probs.items() if p not in constant)


def test_skipped_prompts_and_the_first_adaptation() -> None:
    order = epoch_order(12, 0)
    patterns = [ONES, ZEROS, [1, 0, 0, 0], [1, 1, 0, 0], ONES, ZEROS]
    patterns += [[1, 0, 1, 0], [0, 1, 1, 1], [1, 1, 1, 0], ONES, ZEROS, [0, 0, 0, 1]]
    backend = scripted_by_position(order, patterns)
    # p = 0 and a keep floor of 1e-12: a prompt with an all-correct/all-wrong last entry is skipped
    config = {**BASE, "p_easy": 0.0, "p_hard": 0.0, "min_keep": 1e-12}
    a = create_allocator(config, num_prompts=12, rollouts_per_step=16, seed=0)
    a.start_step(0)
    while (ask := a.ask()) is not None:
        a.tell(backend.generate(ask))
    a.train_groups()

    a.start_step(1)
    ask = a.ask()
    # epoch 1: the six constant prompts are skipped, the six others form the round, in order
    informative = {order[i] for i in (2, 3, 6, 7, 8, 11)}
    epoch1 = epoch_order(12, 0, epoch=1)
    assert ask.prompt_ids == [p for p in epoch1 if p in informative]
    a.tell(backend.generate(ask))
    assert a.ask() is None  # six informative groups >= B
    groups = a.train_groups()
    assert [g.prompt_id for g in groups] == ask.prompt_ids[:4]
    stats = a.stats()
    last = epoch1.index(ask.prompt_ids[-1])
    assert stats["drawn"] == last + 1
    assert stats["skipped_easy"] + stats["skipped_hard"] == last + 1 - 6
    # first step that ends after the first epoch: no easy or hard group -> both p rise by 0.01
    # (only the side a move goes to is clamped, as in the official code: 0 + 0.01 < p_min)
    assert (a.source.epoch, a.p_easy, a.p_hard, stats["adaptations"]) == (1, 0.01, 0.01, 1)


def test_last_round_trains_on_what_exists() -> None:
    order = epoch_order(12, 0)
    mixed = [1, 0, 0, 0]
    patterns = [mixed, mixed, mixed, ONES, ZEROS, ONES, ONES, ZEROS] + [mixed] * 4
    backend = scripted_by_position(order, patterns)
    a = create_allocator(BASE, num_prompts=12, rollouts_per_step=16, seed=0)
    a.start_step(0)
    sizes = []
    while (ask := a.ask()) is not None:
        sizes.append(len(ask))
        a.tell(backend.generate(ask))
    # round 1: 3 informative, z = .5 -> int(4 / .5 / 4 * 1.25) = 2 <= 6: a last round of 2,
    # whose two groups are constant: the step trains 3 < B groups
    assert sizes == [6, 2]
    assert [g.prompt_id for g in a.train_groups()] == order[:3]


def test_all_constant_rounds_give_up_after_max_rounds() -> None:
    backend = ScriptedBackend([ZEROS] * 40)
    stop = create_allocator(
        {**BASE, "max_rounds": 3, "on_max_rounds": "stop", "min_keep": 1.0},
        num_prompts=40,
        rollouts_per_step=16,
        seed=0,
    )
    stop.start_step(0)
    sizes = []
    while (ask := stop.ask()) is not None:
        sizes.append(len(ask))
        stop.tell(backend.generate(ask))
    assert sizes == [6, 6, 6]  # z = 1 every round: full rounds, never the last
    assert stop.train_groups() == []
    error = create_allocator(
        {**BASE, "max_rounds": 2, "min_keep": 1.0}, num_prompts=40, rollouts_per_step=16, seed=0
    )
    error.start_step(0)
    for _ in range(2):
        error.tell(backend.generate(error.ask()))
    with pytest.raises(AllocatorError, match="0 of 4 informative groups after 2 rounds"):
        error.ask()


def test_p_moves_towards_the_targets_after_the_first_epoch() -> None:
    order = epoch_order(8, 0)
    mixed = [1, 1, 0, 0]
    patterns = [ONES, mixed, ONES, mixed, ONES, ONES, ONES, ONES]
    backend = scripted_by_position(order, patterns)
    # B = 2, rounds of up to 4; nothing is skipped (keep floor 1), so every step rolls out
    config = {**BASE, "sampling_factor": 2.0, "min_sampling_factor": 0.5, "min_keep": 1.0}
    a = create_allocator(config, num_prompts=8, rollouts_per_step=8, seed=0)
    seen = []
    for step in range(6):
        a.start_step(step)
        while (ask := a.ask()) is not None:
            a.tell(backend.generate(ask))
        a.train_groups()
        seen.append((a.source.epoch, round(a.p_easy, 10), round(a.p_hard, 10)))
    moved = [e for e in seen if e[0] > 0]
    assert len(moved) == 5  # step 0 ends in epoch 0; every later step in a later epoch
    assert all(e[1:] == (0.5, 0.5) for e in seen if e[0] == 0)
    # every step's easy share >= 1/12 (skip more easy), hard share 0 < 1/6 (skip fewer hard)
    assert [e[1:] for e in moved] == [
        (round(0.5 - 0.01 * k, 10), round(0.5 + 0.01 * k, 10)) for k in range(1, len(moved) + 1)
    ]


def test_p_stays_in_its_bounds() -> None:
    backend = ScriptedBackend([ONES] * 3 + [[1, 0, 1, 0]] * 5)
    config = {**BASE, "sampling_factor": 2.0, "min_sampling_factor": 0.5, "min_keep": 1.0}
    a = create_allocator(
        {**config, "p_easy": 0.05, "p_hard": 0.95}, num_prompts=8, rollouts_per_step=8, seed=0
    )
    for step in range(8):
        a.start_step(step)
        while (ask := a.ask()) is not None:
            a.tell(backend.generate(ask))
        a.train_groups()
    assert a.source.epoch >= 1 and a.stats()["adaptations"] >= 1
    assert (a.p_easy, a.p_hard) == (0.05, 0.95)


def test_loader_batches_overshoot_the_round_size() -> None:
    a = create_allocator({**BASE, "loader_batch": 4}, num_prompts=30, rollouts_per_step=16, seed=0)
    assert a.max_step_rollouts == 10 * (6 + 3) * 4
    a.start_step(0)
    ask = a.ask()
    # survivors are gathered in loader batches of 4 until >= 6: the round holds 8 prompts
    assert len(ask) == 8 and ask.prompt_ids == epoch_order(30, 0)[:8]


@pytest.mark.parametrize(
    ("knobs", "match"),
    [
        ({"n": 1}, "n must be >= 2"),
        ({"min_sampling_factor": 2.0}, "min_sampling_factor <= sampling_factor"),
        ({"margin": 0.0}, "margin must be > 0"),
        ({"p_min": 0.5, "p_max": 0.4}, "p_min <= p_max"),
        ({"p_easy": 1.5}, "p_easy must be in"),
        ({"min_keep": 0.0}, "min_keep must be in"),
        ({"hard_mean": 0.99}, "hard_mean < easy_mean"),
        ({"loader_batch": -1}, "loader_batch must be >= 0"),
        ({"max_rounds": 0}, "max_rounds must be >= 1"),
        ({"on_max_rounds": "train"}, "on_max_rounds must be one of error, stop"),
    ],
)
def test_bad_knobs_name_themselves(knobs: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        create_config({"kind": "greso", **knobs})


def test_budget_must_divide() -> None:
    with pytest.raises(ValueError, match="rollouts_per_step=20 is not divisible by n=8"):
        create_allocator({"kind": "greso"}, num_prompts=10, rollouts_per_step=20, seed=0)


def test_presets_are_the_published_round_sizes() -> None:
    for preset, floor in (("paper-qwen-math", 64), ("paper-r1-distill-1.5b", 128)):
        a = create_allocator(
            {"kind": "greso", "preset": preset}, num_prompts=1000, rollouts_per_step=2048, seed=0
        )
        assert (a.batch_prompts, a.max_round, a.min_round) == (256, 384, floor)
    half = create_allocator(
        {"kind": "greso", "preset": "paper-r1-distill-1.5b"},
        num_prompts=1000,
        rollouts_per_step=1024,
        seed=0,
    )
    assert (half.batch_prompts, half.max_round, half.min_round) == (128, 192, 64)


@pytest.mark.parametrize(
    ("n", "trace", "hard"),
    [(10, "raw", True), (10, "official", False), (8, "raw", False), (8, "official", False)],
)
def test_one_success_in_n_is_hard_only_on_the_raw_scale_from_n_10(
    n: int, trace: str, hard: bool
) -> None:
    """Issue 29, mend (d): on the official scale (wrong = 0.1) 1 of n correct has mean
    0.1 + 0.9/n > 0.11 for n < 90; on the 1/0 scale 1/n <= 0.11 once n >= 10."""
    once = [1.0] + [0.0] * (n - 1)
    order = epoch_order(4, 0)
    backend = scripted_by_position(order, [once, [1.0, 0.0] * (n // 2)] * 2)
    config = {"kind": "greso", "n": n, "sampling_factor": 1.0, "trace_rewards": trace}
    a = create_allocator(config, num_prompts=4, rollouts_per_step=4 * n, seed=0)
    a.start_step(0)
    while (ask := a.ask()) is not None:
        a.tell(backend.generate(ask))
    a.train_groups()
    probs = a.skip_probabilities(np.array([order[0], order[1]])).tolist()
    assert probs == [0.5 if hard else 0.0, 0.0]  # a hard trace entry: skipped at 1 - p_hard
