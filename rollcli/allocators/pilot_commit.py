"""Pilot-Commit: probe many prompts cheaply, spend the bulk of the budget on informative ones.

Each *round* pilots ``pilot_batch_factor * B`` new prompts with ``n_pilot`` rollouts and estimates
each success rate ``p_hat``. A prompt with ``p_lower <= p_hat <= p_upper`` *survives* into the
replay buffer; one with ``p_hat >= evict_at`` (on ``evict_consecutive`` consecutive pilots) is
evicted from the pool for good; every other prompt (too hard, or easy but not evicted) is deferred
to the next epoch. Survivors are *committed*: ``n_commit`` more rollouts, and the prompt's pilot and
commit rollouts train as one GRPO group. Rounds repeat until ``B`` prompts are committed, at most
``max_rounds`` per step (then an error, or with ``on_max_rounds="stop"`` train on what there is).

``B = rollouts_per_step // (n_pilot + n_commit)``: the train batch holds the budget's worth of
rollouts; pilots of prompts that do not survive come on top and are counted by the ledger.

With ``bind`` (the published recipe) every round is ONE ask holding the commits for survivors of
earlier rounds and the new pilots, so a survivor is committed one round after its pilot, possibly
in the next step. Without it a round is a pilot ask followed by a commit ask. Which survivors are
committed first is ``replay.order``: highest pilot std (newer first on ties), random, or oldest
first; a survivor piloted at step ``s`` may be committed at step ``t`` only if
``t - s <= replay.max_age`` (5 reproduces the official flush, which deletes entries with
``step - added > 4`` after each trained step: the published presets use it; the default stays 4, the
value every Pilot-Commit result before the mend was measured with), and the buffer is emptied when
the epoch ends. With ``epoch_resets_rounds`` (the official's behaviour, on in the published presets,
off by default for the same reason), a round that starts a new epoch while the step has
committed groups restarts the ``max_rounds`` count, once per step; as in the official, a step
whose ``max_rounds``-th round ends the epoch gives up there.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

import numpy as np

from rollcli.allocators._common import (
    KeptGroups,
    check_at_least,
    check_choice,
    merge_outcomes,
    nested_config,
    reward_variance,
)
from rollcli.allocators.api import AllocatorError, Ask, AskItem, BaseAllocator, Group, Outcome
from rollcli.allocators.registry import register_allocator
from rollcli.allocators.state import (
    group_from_json,
    group_to_json,
    outcome_from_json,
    outcome_to_json,
)

__all__ = ["ReplayConfig", "PilotCommitConfig", "PilotCommitAllocator"]

# p_hat = k / n_pilot is compared with decimal thresholds: allow for float rounding.
_TOL = 1e-9


@dataclass(frozen=True)
class ReplayConfig:
    """The survivor buffer: commit order, maximum age in steps, flush at epoch end."""

    __pydantic_config__: ClassVar[dict[str, Any]] = {"extra": "forbid"}

    max_age: int = 4
    order: Literal["max_variance", "random", "fifo"] = "max_variance"
    flush_at_epoch_end: bool = True

    def __post_init__(self) -> None:
        if self.max_age < 0:
            raise ValueError(f"replay.max_age must be >= 0, got {self.max_age}")
        check_choice("replay.order", self.order, ["max_variance", "random", "fifo"])


@dataclass(frozen=True)
class PilotCommitConfig:
    """Pilot-Commit; defaults are the published Qwen2.5-Math-1.5B setting (see docs/allocators.md).

    Train batch ``B = rollouts_per_step // (n_pilot + n_commit)`` prompts; each round pilots
    ``pilot_batch_factor * B`` prompts. ``evict_at=None`` never evicts.
    """

    __pydantic_config__: ClassVar[dict[str, Any]] = {"extra": "forbid"}

    kind: Literal["pilot_commit"] = "pilot_commit"
    n_pilot: int = 32
    n_commit: int = 96
    p_lower: float = 0.125
    p_upper: float = 0.75
    evict_at: float | None = 1.0
    evict_consecutive: int = 1
    pilot_batch_factor: int = 3
    bind: bool = True
    replay: ReplayConfig = field(default_factory=ReplayConfig)
    max_rounds: int = 10
    on_max_rounds: Literal["error", "stop"] = "error"
    epoch_resets_rounds: bool = False

    # added after specs were written: left out of dumped specs at its default (job ids)
    LATE_KNOBS: ClassVar[tuple[str, ...]] = ("epoch_resets_rounds",)

    def __post_init__(self) -> None:
        object.__setattr__(self, "replay", nested_config("replay", self.replay, ReplayConfig))
        check_at_least(self, 1, "n_pilot", "n_commit")
        if not 0.0 <= self.p_lower <= self.p_upper <= 1.0:
            raise ValueError(
                f"need 0 <= p_lower <= p_upper <= 1, got p_lower={self.p_lower}, p_upper={self.p_upper}"
            )
        if self.evict_at is not None and not self.p_upper < self.evict_at <= 1.0:
            raise ValueError(
                f"evict_at must lie in (p_upper, 1] (or be null to never evict), got {self.evict_at} "
                f"with p_upper={self.p_upper}"
            )
        check_at_least(self, 1, "evict_consecutive", "pilot_batch_factor", "max_rounds")
        check_choice("on_max_rounds", self.on_max_rounds, ["error", "stop"])


@dataclass
class _Entry:
    """A survivor waiting in the replay buffer."""

    pilot: Outcome
    step: int  # step of its pilot
    seq: int  # insertion order (tie-break after std and step)

    @property
    def std(self) -> float:
        return math.sqrt(reward_variance(self.pilot.rewards))  # equal stds tie exactly


_STEP_COUNTERS = (
    "rounds", "piloted", "survived", "too_hard", "too_easy", "evicted_now",
    "committed", "aged_out", "flushed", "skipped_busy", "rounds_reset",
)  # fmt: skip


_PAPER = {
    "p_lower": 0.125,
    "p_upper": 0.75,
    "evict_at": 1.0,
    "evict_consecutive": 1,
    "pilot_batch_factor": 3,
    "bind": True,
    "max_rounds": 10,
    "epoch_resets_rounds": True,
}


@register_allocator
class PilotCommitAllocator(KeptGroups, BaseAllocator):
    """Pilot rounds, survivor buffer, commits, bound or sequential; see the module docstring."""

    config_class = PilotCommitConfig
    presets = {
        # Qwen2.5-Math-1.5B, DeepMath: train_scripts/pc_qwen2.5-1.5b_p32c96.sh (the defaults)
        "paper-1.5b": {
            "n_pilot": 32,
            "n_commit": 96,
            **_PAPER,
            "replay": {"max_age": 5, "order": "max_variance", "flush_at_epoch_end": True},
        },
        # Qwen3-4B, Polaris: pc_qwen3-4b_p16c48.sh
        "paper-4b": {
            "n_pilot": 16,
            "n_commit": 48,
            **_PAPER,
            "replay": {"max_age": 5, "order": "random", "flush_at_epoch_end": True},
        },
    }

    preset_prompts_per_step = {"paper-1.5b": 128}  # REFERENCE.md §1: 128 prompts / step

    def __init__(self, config: PilotCommitConfig, **kwargs: Any) -> None:
        super().__init__(config, **kwargs)
        per_prompt = config.n_pilot + config.n_commit
        self.batch_prompts = self.prompts_per_step(per_prompt, f"n_pilot + n_commit = {per_prompt}")
        self.pilot_batch_prompts = config.pilot_batch_factor * self.batch_prompts
        self._buffer: dict[int, _Entry] = {}
        self._seq = 0
        self._committing: dict[int, Outcome] = {}  # prompt -> its pilot, commit pending
        self._pilot_epoch: dict[int, int] = {}  # prompt -> epoch its pending pilot was taken in
        self._groups: list[Group] = []
        self._streak: dict[int, int] = {}  # prompt -> consecutive pilots with p_hat >= evict_at
        self._buffer_epoch = self.source.epoch
        self._next_commit = False  # sequential mode: the next ask commits
        self._counters = dict.fromkeys(_STEP_COUNTERS, 0)
        self._totals = dict.fromkeys(_STEP_COUNTERS, 0)

    @property
    def max_step_rollouts(self) -> int:
        """The most one step can generate: every round's pilots plus one train batch of commits
        (twice ``max_rounds`` rounds with ``epoch_resets_rounds``, which may restart the count once)."""
        c = self.config
        rounds = c.max_rounds * (2 if c.epoch_resets_rounds else 1)
        return rounds * self.pilot_batch_prompts * c.n_pilot + self.batch_prompts * c.n_commit

    # -- protocol -------------------------------------------------------------------------
    def _start_step(self) -> None:
        self._groups = []
        self._next_commit = False
        self._counters = dict.fromkeys(_STEP_COUNTERS, 0)

    def _count(self, key: str, k: int = 1) -> None:
        self._counters[key] += k
        self._totals[key] += k

    def _needed(self) -> int:
        return self.batch_prompts - len(self._groups) - len(self._committing)

    def _ask(self) -> Ask | None:
        if self._needed() <= 0:
            return None
        if self.config.bind:
            return self._ask_bound()
        return self._ask_sequential()

    def _ask_bound(self) -> Ask | None:
        if not self._round_allowed():
            return None
        # Commits first: survivors of the last round are due even if the pilots below roll the
        # epoch over and flush the rest of the buffer.
        commits = self._select_commits(self._needed())
        pilots = self._take_pilots()
        if pilots:
            self._count("rounds")
        items = [AskItem(p, self.config.n_commit, "commit") for p in commits]
        items += [AskItem(p, self.config.n_pilot, "pilot") for p in pilots]
        return Ask(tuple(items)) if items else None

    def _ask_sequential(self) -> Ask | None:
        if self._next_commit:
            self._next_commit = False
            commits = self._select_commits(self._needed())
            if commits:
                return Ask(tuple(AskItem(p, self.config.n_commit, "commit") for p in commits))
        if not self._round_allowed():
            return None
        pilots = self._take_pilots()
        if not pilots:  # pool exhausted: commit what the buffer still holds, then stop
            commits = self._select_commits(self._needed())
            items = tuple(AskItem(p, self.config.n_commit, "commit") for p in commits)
            return Ask(items) if items else None
        self._count("rounds")
        self._next_commit = True
        return Ask(tuple(AskItem(p, self.config.n_pilot, "pilot") for p in pilots))

    def _round_allowed(self) -> bool:
        # The official checks its count right after each round, before its dataloader can run
        # out: a step whose max_rounds-th round ends the epoch raises there. Only a round that
        # starts a new epoch after an earlier round ended the last one counts from 1 again
        # (_take_pilots resets the count as it crosses).
        if self._counters["rounds"] < self.config.max_rounds:
            return True
        if self.config.on_max_rounds == "stop":
            return False
        raise AllocatorError(
            f"pilot_commit: only {len(self._groups)} of {self.batch_prompts} prompts committed after "
            f"{self._counters['rounds']} rounds in step {self.step} ({self._counters['survived']} of "
            f"{self._counters['piloted']} pilots survived p in [{self.config.p_lower}, "
            f"{self.config.p_upper}]). Widen the thresholds, raise max_rounds or pilot_batch_factor, "
            "or set on_max_rounds=stop."
        )

    def _may_reset_rounds(self) -> bool:
        """The official resets its round count at an epoch end that discards a partial batch."""
        return (
            self.config.epoch_resets_rounds
            and bool(self._groups)
            and self._counters["rounds_reset"] == 0
        )

    def _take_pilots(self) -> list[int]:
        """Next pilot prompts in epoch order, skipping any in the buffer or awaiting commit.

        Crosses at most one epoch boundary per round (a pool smaller than the pilot batch gives a
        smaller round rather than several epochs, each flushing the buffer, in one round).
        """
        want = self.pilot_batch_prompts
        pilots: list[int] = []
        chosen: set[int] = set()
        epochs: dict[int, int] = {}
        crossed = False
        while len(pilots) < want:
            epoch = self.source.epoch
            got = self.source.take(want - len(pilots), wrap=False)
            if not got:
                if crossed or self.source.num_active == 0:
                    break
                self.source.new_epoch()
                self._maybe_flush()
                if self._may_reset_rounds():
                    self._counters["rounds"] = 0
                    self._count("rounds_reset")
                crossed = True
                continue
            for p in got:
                if p in self._buffer or p in self._committing or p in chosen:
                    self._count("skipped_busy")
                    continue
                pilots.append(p)
                chosen.add(p)
                epochs[p] = epoch
        self._pilot_epoch = epochs
        return pilots

    def _maybe_flush(self) -> None:
        if self.source.epoch != self._buffer_epoch:
            self._buffer_epoch = self.source.epoch
            if self.config.replay.flush_at_epoch_end:
                self._count("flushed", len(self._buffer))
                self._buffer.clear()

    def _select_commits(self, k: int) -> list[int]:
        """Pop up to ``k`` survivors from the buffer (after dropping aged ones), in replay order."""
        max_age = self.config.replay.max_age
        for p in [p for p, e in self._buffer.items() if self.step - e.step > max_age]:
            del self._buffer[p]
            self._count("aged_out")
        if k <= 0 or not self._buffer:
            return []
        entries = sorted(self._buffer.items(), key=lambda kv: kv[1].seq)
        order = self.config.replay.order
        if order == "max_variance":
            entries.sort(key=lambda kv: (-kv[1].std, -kv[1].step, kv[1].seq))
        elif order == "fifo":
            entries.sort(key=lambda kv: (kv[1].step, kv[1].seq))
        else:  # random
            perm = self.rng.permutation(len(entries))
            entries = [entries[i] for i in perm]
        chosen = [p for p, _ in entries[:k]]
        for p in chosen:
            self._committing[p] = self._buffer.pop(p).pilot
        return chosen

    def _tell(self, outcomes: list[Outcome]) -> None:
        for o in outcomes:
            if o.phase == "commit":
                pilot = self._committing.pop(o.prompt_id)
                self._groups.append(merge_outcomes(o.prompt_id, [pilot, o]))
                self._count("committed")
            else:
                self._judge_pilot(o)
        self._pilot_epoch = {}

    def _judge_pilot(self, o: Outcome) -> None:
        c = self.config
        p = o.prompt_id
        p_hat = float(np.mean(o.rewards))
        self._count("piloted")
        if c.evict_at is not None and p_hat >= c.evict_at - _TOL:
            self._streak[p] = self._streak.get(p, 0) + 1
            if self._streak[p] >= c.evict_consecutive:
                del self._streak[p]
                self.source.evict(p)
                self._count("evicted_now")
                return
        else:
            self._streak.pop(p, None)
        if c.p_lower - _TOL <= p_hat <= c.p_upper + _TOL:
            self._buffer[p] = _Entry(o, self.step, self._seq)
            self._seq += 1
            self._count("survived")
            return
        self._count("too_easy" if p_hat > c.p_upper else "too_hard")
        # A pilot taken before the epoch rolled over is already back in the new epoch's order.
        if self._pilot_epoch.get(p, self.source.epoch) == self.source.epoch:
            self.source.defer(p)

    # -- introspection ----------------------------------------------------------------------
    def live_refs(self) -> set[Any]:
        refs: set[Any] = set()
        for e in self._buffer.values():
            refs.update(e.pilot.refs)
        for pilot in self._committing.values():
            refs.update(pilot.refs)
        for g in self._groups:
            refs.update(g.refs)
        return refs

    def stats(self) -> dict[str, float]:
        out: dict[str, float] = {**super().stats(), "buffer_size": len(self._buffer)}
        out.update(self._counters)
        out["pilot_pass_rate"] = self._counters["survived"] / max(self._counters["piloted"], 1)
        out.update({f"total_{k}": v for k, v in self._totals.items()})
        return out

    # -- state ------------------------------------------------------------------------------
    def _state(self) -> dict[str, Any]:
        return {
            "buffer": [
                [p, outcome_to_json(e.pilot), e.step, e.seq] for p, e in self._buffer.items()
            ],
            "seq": self._seq,
            "committing": [outcome_to_json(o) for o in self._committing.values()],
            "pilot_epoch": [[p, e] for p, e in self._pilot_epoch.items()],
            "groups": [group_to_json(g) for g in self._groups],
            "streak": [[p, s] for p, s in self._streak.items()],
            "buffer_epoch": self._buffer_epoch,
            "next_commit": self._next_commit,
            "counters": dict(self._counters),
            "totals": dict(self._totals),
        }

    def _load_state(self, state: dict[str, Any]) -> None:
        self._buffer = {
            int(p): _Entry(outcome_from_json(o), int(s), int(q)) for p, o, s, q in state["buffer"]
        }
        self._seq = int(state["seq"])
        committing = [outcome_from_json(o) for o in state["committing"]]
        self._committing = {o.prompt_id: o for o in committing}
        self._pilot_epoch = {int(p): int(e) for p, e in state["pilot_epoch"]}
        self._groups = [group_from_json(g) for g in state["groups"]]
        self._streak = {int(p): int(s) for p, s in state["streak"]}
        self._buffer_epoch = int(state["buffer_epoch"])
        self._next_commit = bool(state["next_commit"])
        # a counter missing from an older checkpoint (rounds_reset) starts at 0
        self._counters = {k: int(state["counters"].get(k, 0)) for k in _STEP_COUNTERS}
        self._totals = {k: int(state["totals"].get(k, 0)) for k in _STEP_COUNTERS}
