"""SPEED: screen new prompts with a few rollouts, continue those that pass, train complete ones.

SPEED-RL (Zanette-Labs/speed-rl, ``verl/trainer/ppo/data_controller.py`` and
``recipe/dapo/src/fast_dapo_ray_trainer.py``). Every generation call holds
``gen_batch_factor * B`` new prompts with ``n_screen`` rollouts each and the continuation
(``n_continue`` more) of the prompts that passed the previous call's screen, i.e. whose
``n_screen`` rewards are not all equal (std > 0): the binding of Pilot-Commit. A prompt is
*complete* once continued; its ``n_screen + n_continue`` rollouts train as one GRPO group.
Calls repeat until ``B = rollouts_per_step // (n_screen + n_continue)`` prompts are complete;
the step trains the first ``B`` in screening order. Extra complete prompts, and passed prompts
still waiting for their continuation, carry over to later steps with no age bound. A step
that would make its ``max_gen_calls``-th call gives up (the official raises).

Two artefacts of the official implementation are kept behind knobs (both on in the
``paper-7b`` preset): continuations go out in multiples of ``continue_multiple`` (the
number of GPUs; the rest waits for the next call), and with ``skip_batch_on_train`` each
training step consumes a batch of new prompts that is never generated (its loop draws a
dataloader batch for every iteration, training ones included).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Literal

import numpy as np

from rollcli.allocators._common import check_at_least, check_choice, merge_outcomes
from rollcli.allocators.api import AllocatorError, Ask, AskItem, BaseAllocator, Group, Outcome
from rollcli.allocators.registry import register_allocator
from rollcli.allocators.state import outcome_from_json, outcome_to_json

__all__ = ["SpeedConfig", "SpeedAllocator"]


@dataclass(frozen=True)
class SpeedConfig:
    """SPEED; the published 7B setting (``run_fast_rloo_7b.sh``) apart from the two artefacts.

    Train batch ``B = rollouts_per_step // (n_screen + n_continue)`` prompts; every call
    screens ``gen_batch_factor * B`` new prompts.
    """

    __pydantic_config__: ClassVar[dict[str, Any]] = {"extra": "forbid"}

    kind: Literal["speed"] = "speed"
    n_screen: int = 4
    n_continue: int = 20
    gen_batch_factor: int = 4
    max_gen_calls: int = 50
    on_max_gen_calls: Literal["error", "train"] = "error"
    continue_multiple: int = 1
    skip_batch_on_train: bool = False

    def __post_init__(self) -> None:
        if self.n_screen < 2:
            raise ValueError(
                f"n_screen must be >= 2 (one reward never has spread), got {self.n_screen}"
            )
        check_at_least(self, 1, "n_continue", "gen_batch_factor")
        if self.max_gen_calls < 2:
            raise ValueError(
                f"max_gen_calls must be >= 2 (the call that reaches it gives up), "
                f"got {self.max_gen_calls}"
            )
        check_at_least(self, 1, "continue_multiple")
        check_choice("on_max_gen_calls", self.on_max_gen_calls, ["error", "train"])


@dataclass
class _Entry:
    """A prompt that passed its screen: its screening outcome and, once continued, the rest."""

    prompt: int
    screen: Outcome
    rest: Outcome | None = None


_STEP_COUNTERS = ("gen_calls", "screened", "passed", "continued", "trained", "skipped_prompts")


@register_allocator
class SpeedAllocator(BaseAllocator):
    """Screen-and-continue calls until ``B`` prompts are complete; see the module docstring."""

    config_class = SpeedConfig
    presets = {
        # Qwen2.5-Math-7B, DeepScaleR: run_fast_rloo_7b.sh (train 16, gen 64, n 4 + 20, 4 GPUs)
        "paper-7b": {
            "n_screen": 4,
            "n_continue": 20,
            "gen_batch_factor": 4,
            "max_gen_calls": 50,
            "continue_multiple": 4,
            "skip_batch_on_train": True,
        },
    }

    def __init__(self, config: SpeedConfig, **kwargs: Any) -> None:
        super().__init__(config, **kwargs)
        per_prompt = config.n_screen + config.n_continue
        self.batch_prompts = self.prompts_per_step(
            per_prompt, f"n_screen + n_continue = {per_prompt}"
        )
        self.gen_batch_prompts = config.gen_batch_factor * self.batch_prompts
        self._entries: dict[int, _Entry] = {}  # seq -> entry, in screening order
        self._queue: list[int] = []  # seqs waiting for their continuation, in order
        self._continuing: dict[int, int] = {}  # prompt -> seq, continuation asked
        self._seq = 0
        self._counters = dict.fromkeys(_STEP_COUNTERS, 0)
        self._totals = dict.fromkeys(_STEP_COUNTERS, 0)

    @property
    def max_step_rollouts(self) -> int:
        """Every call a step may make: new screens plus the continuation of a full queue."""
        c = self.config
        queue = self.gen_batch_prompts + c.continue_multiple - 1
        per_call = self.gen_batch_prompts * c.n_screen + queue * c.n_continue
        return (c.max_gen_calls - 1) * per_call

    def _count(self, key: str, k: int = 1) -> None:
        self._counters[key] += k
        self._totals[key] += k

    def _complete(self) -> list[int]:
        return [s for s, e in self._entries.items() if e.rest is not None]

    def _start_step(self) -> None:
        self._counters = dict.fromkeys(_STEP_COUNTERS, 0)

    def _ask(self) -> Ask | None:
        c = self.config
        if len(self._complete()) >= self.batch_prompts:
            if c.skip_batch_on_train:
                self._count("skipped_prompts", len(self.source.take(self.gen_batch_prompts)))
            return None
        if self._counters["gen_calls"] + 1 >= c.max_gen_calls:
            if c.on_max_gen_calls == "train":
                return None
            raise AllocatorError(
                f"speed: only {len(self._complete())} of {self.batch_prompts} prompts complete "
                f"after {self._counters['gen_calls']} generation calls in step {self.step} "
                f"({self._counters['passed']} of {self._counters['screened']} screens passed). "
                "The prompts are too easy or too hard for n_screen; raise max_gen_calls or set "
                "on_max_gen_calls=train."
            )
        cut = len(self._queue) - len(self._queue) % c.continue_multiple
        due, self._queue = self._queue[:cut], self._queue[cut:]
        busy = {self._entries[s].prompt for s in self._queue + due}
        new = self._take_new(busy)
        if not new and not due:
            self._queue = due + self._queue
            return None
        self._count("gen_calls")
        self._continuing = {self._entries[s].prompt: s for s in due}
        items = [AskItem(p, c.n_screen, "screen") for p in new]
        items += [AskItem(self._entries[s].prompt, c.n_continue, "continue") for s in due]
        return Ask(tuple(items))

    def _take_new(self, busy: set[int]) -> list[int]:
        """The next new prompts in epoch order, skipping those waiting for a continuation."""
        want = self.gen_batch_prompts
        new: list[int] = []
        for _ in range(3):  # a few refills past busy prompts; the pool may be all busy
            got = [p for p in self.source.take(want - len(new)) if p not in busy]
            new += got
            busy.update(got)
            if len(new) >= want or not got:
                break
        return new

    def _tell(self, outcomes: list[Outcome]) -> None:
        screens = [o for o in outcomes if o.phase != "continue"]
        for o in outcomes:
            if o.phase == "continue":
                self._entries[self._continuing.pop(o.prompt_id)].rest = o
                self._count("continued")
        if not screens:
            return
        # std > 0 <=> not all equal; one vectorised pass over the call's screens
        sizes = np.array([o.num_rollouts for o in screens])
        starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
        rewards = np.concatenate([o.rewards for o in screens]).astype(float)
        spread = np.maximum.reduceat(rewards, starts) > np.minimum.reduceat(rewards, starts)
        self._count("screened", len(screens))
        for o, passed in zip(screens, (spread & (sizes > 1)).tolist(), strict=True):
            if passed:
                self._entries[self._seq] = _Entry(o.prompt_id, o)
                self._queue.append(self._seq)
                self._seq += 1
                self._count("passed")

    def _train_groups(self) -> list[Group]:
        chosen = self._complete()[: self.batch_prompts]
        groups = []
        for s in chosen:
            e = self._entries.pop(s)
            assert e.rest is not None
            groups.append(merge_outcomes(e.prompt, [e.screen, e.rest]))
        self._count("trained", len(groups))
        return groups

    def live_refs(self) -> set[Any]:
        refs: set[Any] = set()
        for e in self._entries.values():
            refs.update(e.screen.refs)
            if e.rest is not None:
                refs.update(e.rest.refs)
        return refs

    def stats(self) -> dict[str, float]:
        complete = len(self._complete())
        return {
            **super().stats(),
            **self._counters,
            "waiting_continue": len(self._entries) - complete,
            "waiting_train": complete,
            **{f"total_{k}": v for k, v in self._totals.items()},
        }

    def _state(self) -> dict[str, Any]:
        return {
            "entries": [
                [
                    s,
                    e.prompt,
                    outcome_to_json(e.screen),
                    None if e.rest is None else outcome_to_json(e.rest),
                ]
                for s, e in self._entries.items()
            ],
            "queue": list(self._queue),
            "continuing": [[p, s] for p, s in self._continuing.items()],
            "seq": self._seq,
            "counters": dict(self._counters),
            "totals": dict(self._totals),
        }

    def _load_state(self, state: dict[str, Any]) -> None:
        self._entries = {
            int(s): _Entry(
                int(p), outcome_from_json(sc), None if r is None else outcome_from_json(r)
            )
            for s, p, sc, r in state["entries"]
        }
        self._queue = [int(s) for s in state["queue"]]
        self._continuing = {int(p): int(s) for p, s in state["continuing"]}
        self._seq = int(state["seq"])
        self._counters = {k: int(state["counters"][k]) for k in _STEP_COUNTERS}
        self._totals = {k: int(state["totals"][k]) for k in _STEP_COUNTERS}
