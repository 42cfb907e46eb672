"""SPEED: screening, bound continuations, carry-over, the official artefacts, giving up."""

from __future__ import annotations

import pytest

from rollcli.allocators import AllocatorError, create_allocator
from tests.allocators.conftest import epoch_order, scripted_by_position

SEED = 3
BASE = {"kind": "speed", "n_screen": 2, "n_continue": 2, "gen_batch_factor": 2}
# by epoch-0 position: pass (rewards differ) or fail (all equal) the 2-rollout screen
PATTERNS = [[1, 0], [1, 1], [0, 1], [0, 0], [1, 0], [0, 0], [1, 1], [0, 1]]


def test_screen_then_continue_in_the_next_call(make) -> None:
    o = epoch_order(8, SEED)
    run = make(BASE, scripted_by_position(o, PATTERNS), 8, SEED)  # B = 8 // 4 = 2, 4 new a call
    groups = run.step(0)
    assert run.asks == [
        [(o[0], 2, "screen"), (o[1], 2, "screen"), (o[2], 2, "screen"), (o[3], 2, "screen")],
        [(o[4], 2, "screen"), (o[5], 2, "screen"), (o[6], 2, "screen"), (o[7], 2, "screen"),
         (o[0], 2, "continue"), (o[2], 2, "continue")],
    ]  # fmt: skip
    assert [(g.prompt_id, g.size) for g in groups] == [(o[0], 4), (o[2], 4)]
    assert groups[0].rewards.tolist() == [1, 0, 1, 0]  # screen + continuation, one group
    s = run.allocator.stats()
    assert (s["gen_calls"], s["screened"], s["passed"], s["trained"]) == (2, 8, 4, 2)
    assert s["waiting_continue"] == 2  # o[4], o[7] passed in call 2
    # step 1: the next epoch's first prompts are screened, o[4] and o[7] continued
    e1 = epoch_order(8, SEED, epoch=1)
    groups = run.step(1)
    assert run.asks[0][-2:] == [(o[4], 2, "continue"), (o[7], 2, "continue")]
    assert [i[0] for i in run.asks[0][:4]] == [p for p in e1 if p not in (o[4], o[7])][:4]
    assert [g.prompt_id for g in groups] == [o[4], o[7]]


def test_extra_complete_prompts_wait_for_later_steps(make) -> None:
    o = epoch_order(8, SEED)
    run = make({**BASE, "gen_batch_factor": 4}, scripted_by_position(o, PATTERNS), 4, SEED)
    first = run.step(0)  # B = 1: call 1 screens o[0..3], call 2 continues o[0] and o[2]
    assert [g.prompt_id for g in first] == [o[0]]
    second = run.step(1)  # o[2] is complete already: no generation at all
    assert run.asks == [] and [g.prompt_id for g in second] == [o[2]]
    assert run.allocator.ledger.step_rollouts == 0


def test_continuations_go_out_in_multiples(make) -> None:
    o = epoch_order(8, SEED)
    run = make({**BASE, "continue_multiple": 3}, scripted_by_position(o, PATTERNS), 8, SEED)
    run.allocator.start_step(0)
    a = run.allocator
    a.tell(run.backend.generate(a.ask()))  # o[0], o[2] pass: 2 < 3, both wait
    second = a.ask()
    assert [i.phase for i in second.items] == ["screen"] * 4
    a.tell(run.backend.generate(second))  # o[4], o[7] pass: 4 waiting, 3 go out
    third = a.ask()
    assert [(i.prompt_id, i.phase) for i in third.items if i.phase == "continue"] == [
        (o[0], "continue"), (o[2], "continue"), (o[4], "continue"),
    ]  # fmt: skip


def test_a_training_step_skips_a_batch_of_new_prompts(make) -> None:
    o = epoch_order(8, SEED)
    run = make(
        {**BASE, "gen_batch_factor": 4, "skip_batch_on_train": True},
        scripted_by_position(o, PATTERNS),
        4,
        SEED,
    )
    run.step(0)  # two calls take o[0..3], o[4..7]; the training iteration skips 4 more
    assert run.allocator.stats()["skipped_prompts"] == 4
    assert run.allocator.source.epoch == 1


def test_gives_up_at_the_call_that_reaches_max_gen_calls(make) -> None:
    o = epoch_order(8, SEED)
    hopeless = [[1, 1]] * 8
    run = make({**BASE, "max_gen_calls": 3}, scripted_by_position(o, hopeless), 8, SEED)
    with pytest.raises(AllocatorError, match="after 2 generation calls"):
        run.step(0)
    assert run.allocator.ledger.step_rollouts == 2 * 4 * 2
    run = make(
        {**BASE, "max_gen_calls": 3, "on_max_gen_calls": "train"},
        scripted_by_position(o, hopeless),
        8,
        SEED,
    )
    assert run.step(0) == [] and len(run.asks) == 2


def test_config_errors_name_the_knob() -> None:
    for knobs, text in [
        ({"n_screen": 1}, "n_screen"),
        ({"max_gen_calls": 1}, "max_gen_calls"),
        ({"continue_multiple": 0}, "continue_multiple"),
    ]:
        with pytest.raises(ValueError, match=text):
            create_allocator({**BASE, **knobs}, num_prompts=8, rollouts_per_step=8, seed=0)
    with pytest.raises(ValueError, match="n_screen \\+ n_continue = 24"):
        create_allocator({"kind": "speed"}, num_prompts=8, rollouts_per_step=100, seed=0)
