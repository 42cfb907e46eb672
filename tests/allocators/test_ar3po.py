"""AR3PO's adaptive rollout: a prompt stops at its first correct answer (no official code found;
arXiv 2509.25808's abstract and summaries are the source)."""

from __future__ import annotations

import pytest

from rollcli.allocators import create_allocator
from rollcli.allocators.ar3po import Ar3poConfig
from rollcli.testing.fakes import ScriptedBackend, drive_step


def test_prompts_stop_at_their_first_correct_round() -> None:
    # 0: right at once; 1: right only in its 3rd round; 2: never right; 3: right in round 2
    patterns = [[1.0], [0.0] * 4 + [1.0, 0.0], [0.0], [0.0, 0.0, 0.0, 1.0]]
    backend = ScriptedBackend(patterns)
    config = Ar3poConfig(round_size=2, max_rounds=4)
    alloc = create_allocator(config, num_prompts=4, rollouts_per_step=32, seed=0)
    groups = drive_step(alloc, backend, 0)
    sizes = {g.prompt_id: g.size for g in groups}
    assert sizes == {0: 2, 1: 6, 2: 8, 3: 4}
    assert alloc.ledger.step_rollouts == 20 <= alloc.max_step_rollouts
    rounds = [(p, ph) for p, ph, _n, _t in backend.generated]
    assert [p for p, ph in rounds if ph == "round4"] == [2]
    assert alloc.stats()["unsolved"] == 1.0 and alloc.stats()["rounds"] == 4.0


def test_batch_keeps_to_the_budget() -> None:
    with pytest.raises(ValueError, match="round_size \\* max_rounds=8"):
        create_allocator(Ar3poConfig(), num_prompts=10, rollouts_per_step=12, seed=0)
