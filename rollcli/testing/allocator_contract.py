"""The contract every allocator passes, driven against :class:`FakeBackend` (optuna style).

A test module subclasses :class:`AllocatorContract` and provides a ``case`` fixture yielding
:class:`ContractCase` objects; pytest collects the inherited ``test_*`` methods. A case names
its allocator by a config mapping (``{"kind": ..., <knobs>}``, for registered kinds) or by a
factory ``factory(*, num_prompts, rollouts_per_step, seed, oracle) -> BaseAllocator``, so an
outside author can hold an allocator to the contract without registering it::

    from rollcli.testing.allocator_contract import AllocatorContract, ContractCase

    CASES = [ContractCase(factory=lambda **kw: MyAllocator(MyConfig(n=4), **kw),
                          rollouts_per_step=32, name="mine-n4")]

    @pytest.fixture(params=CASES, ids=[c.id for c in CASES])
    def case(request):
        return request.param

    class TestMyAllocator(AllocatorContract):
        pass

``contract_cases()`` has cases for every kind rollcli ships, with non-default knobs. Every run
checks, after every protocol call (:class:`ContractRun`):

* the ledger equals what the backend generated, per step and in total, rollouts and tokens,
  and counts as trained exactly the rollouts of the returned groups; its breakdown
  (:mod:`rollcli.allocators.breakdown`) matches one recomputed here from the told rollouts,
  the groups and ``live_refs()``: informative + zero_var + decision + held = generated;
* ``max_step_rollouts`` is an int >= 1 and no step generates more (the budget, or the stated
  bound of an algorithm that overspends by design such as DAPO refill or Pilot-Commit pilots);
  ``min_step_rollouts`` is an int in ``[0, max_step_rollouts]`` and no step generates fewer;
  no step trains fewer than ``min_step_trained``;
* training groups hold only told rollouts, with the told rewards, each rollout trained once,
  and every ref still held by the backend after ``retain(live_refs())`` (the fake fails
  otherwise; a group's baseline is checked by :class:`~rollcli.allocators.Group` itself);
* an evicted prompt is never asked again; a deferred prompt is not asked again in its epoch
  and is asked again in the next one; no ask holds a prompt twice;
* ``live_refs()`` is a set of rollouts told and not yet trained, the same when called again;
* ``stats()`` is a dict of names to finite ints/floats (no bools, strings or arrays) that holds
  the base's ``evicted``, ``deferred`` and ``epoch``, has the same keys at every step (and after a
  state round trip), and reading it changes nothing;
* ``state_dict()`` is JSON-serialisable at every point.

On top: same seed gives the same decisions, and a JSON state round-trip at any point of a step
(even with an ask pending) continues exactly as the uninterrupted run.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import numpy as np

from rollcli.allocators import Ask, BaseAllocator, Group, create_allocator
from rollcli.testing.fakes import FakeBackend

__all__ = [
    "AllocatorFactory",
    "ContractCase",
    "ContractRun",
    "AllocatorContract",
    "assert_round_trip",
    "contract_cases",
    "make_pool",
]


def make_pool(num_prompts: int, seed: int = 1234) -> np.ndarray:
    """A pool like a real one: a quarter never solved, a quarter always solved, the rest uniform."""
    rng = np.random.default_rng(seed)
    p = rng.uniform(0.0, 1.0, num_prompts)
    kind = rng.permutation(num_prompts) % 4
    p[kind == 0] = 0.0
    p[kind == 1] = 1.0
    return p


AllocatorFactory = Callable[..., BaseAllocator]


@dataclass(frozen=True)
class ContractCase:
    """One allocator configuration to hold to the contract: a config mapping or a factory."""

    config: Mapping[str, Any] | None = None
    rollouts_per_step: int = 32
    num_prompts: int = 48
    steps: int = 8
    factory: AllocatorFactory | None = field(default=None, compare=False)
    name: str | None = None

    def __post_init__(self) -> None:
        if (self.config is None) == (self.factory is None):
            raise ValueError("a ContractCase takes either config= or factory=, not both or neither")
        if self.factory is not None and not self.name:
            raise ValueError("a ContractCase with a factory needs a name= (its test id)")

    def create(self, *, seed: int, oracle: Any = None) -> BaseAllocator:
        """A fresh allocator for this case."""
        make = self.factory or partial(create_allocator, dict(self.config or {}))
        allocator = make(
            num_prompts=self.num_prompts,
            rollouts_per_step=self.rollouts_per_step,
            seed=seed,
            oracle=oracle,
        )
        assert isinstance(allocator, BaseAllocator), f"{self.id}: not a BaseAllocator"
        return allocator

    @property
    def kind(self) -> str:
        if self.config is not None:
            return str(self.config["kind"])
        return self.create(seed=0, oracle=_half).kind

    @property
    def id(self) -> str:
        if self.name:
            return self.name
        knobs = ",".join(f"{k}={v}" for k, v in (self.config or {}).items() if k != "kind")
        return f"{self.kind}[{knobs}]"


def _half(prompt_ids: Any) -> np.ndarray:
    """A stand-in oracle (p = 0.5 everywhere) for reading a factory case's kind."""
    return np.full(len(prompt_ids), 0.5)


def contract_cases() -> list[ContractCase]:
    """Small, fast configurations of every allocator kind, non-default knobs included."""
    pc = {"kind": "pilot_commit", "n_pilot": 4, "n_commit": 4, "on_max_rounds": "stop"}
    return [
        ContractCase({"kind": "uniform", "n": 4}, 32),
        ContractCase({"kind": "dynamic", "n": 4, "gen_batch_factor": 2}, 32),
        ContractCase(
            {"kind": "dynamic", "n": 4, "gen_batch_factor": 1, "on_max_gen_batches": "train"}, 32
        ),
        ContractCase({**pc, "on_max_rounds": "error"}, 32, steps=6),
        ContractCase({**pc, "bind": False}, 32),
        ContractCase({**pc, "replay": {"order": "random", "max_age": 1}}, 32),
        ContractCase({**pc, "replay": {"order": "fifo", "max_age": 0}, "evict_consecutive": 2}, 32),
        ContractCase(
            {**pc, "bind": False, "evict_at": None, "replay": {"flush_at_epoch_end": False}}, 32
        ),
        ContractCase({"kind": "vigor"}, 64),
        ContractCase({"kind": "vigor", "tie_break": "first", "train_dropped": False}, 64),
        ContractCase(
            {"kind": "vigor", "m0": 3, "alpha": 0.7, "gamma": 1.5, "all_zero": "stop"}, 40
        ),
        ContractCase({"kind": "oracle_select", "n": 4}, 32),
        ContractCase(
            {"kind": "oracle_select", "n": 4, "score": "informative", "candidate_factor": 2}, 32
        ),
        ContractCase({"kind": "oracle", "n_max": 8}, 32),
        ContractCase(
            {"kind": "oracle", "n_min": 3, "objective": "signal", "num_candidates": 12}, 30
        ),
        ContractCase({"kind": "pods", "n": 8, "m": 4}, 32),
        ContractCase({"kind": "pods", "n": 6, "m": 3, "rule": "random", "budget": "generated"}, 36),
        ContractCase({"kind": "pods", "n": 5, "m": 2, "rule": "max_reward"}, 16),
        ContractCase({"kind": "reinforce_ada", "round_repeat": 4, "max_rounds": 3}, 32),
        ContractCase(
            {"kind": "reinforce_ada", "choice": "positive_focused", "global_stats": False}, 32
        ),
        ContractCase(
            {"kind": "reinforce_ada", "num_keep": 1, "round_repeat": 1, "max_rounds": 2}, 8
        ),
        ContractCase({"kind": "greso", "n": 4}, 32, steps=10),
        ContractCase(
            {
                "kind": "greso",
                "n": 4,
                "loader_batch": 5,
                "p_easy": 0.2,
                "p_hard": 0.3,
                "max_rounds": 2,
                "on_max_rounds": "stop",
            },
            32,
            steps=10,
        ),
        ContractCase({"kind": "mopps", "n": 4, "candidate_factor": 3.0}, 32),
        ContractCase(
            {
                "kind": "mopps",
                "n": 4,
                "candidate_factor": 2.0,
                "decay": 0.5,
                "strategy": "threshold",
                "candidates": "epoch",
            },
            32,
        ),
        ContractCase({"kind": "mopps", "n": 2, "strategy": "uniform"}, 16),
        ContractCase({"kind": "spo"}, 16),
        ContractCase({"kind": "bayes_budget", "n_max": 8}, 32, steps=6),
        ContractCase(
            {
                "kind": "bayes_budget",
                "n_min": 3,
                "objective": "signal",
                "train_pilots": "all",
                "decay": 0.5,
                "candidate_factor": 1.0,
            },
            30,
        ),  # fmt: skip
        ContractCase({"kind": "bayes_budget", "pilot_share": 0.0, "std_normalize": False}, 16),
        ContractCase({"kind": "bayes_budget", "preset": "diverse"}, 16),
        ContractCase(
            {"kind": "bayes_budget", "pilot_share": 0.5, "explore_share": 0.5, "trained_keep": 0.5},
            24,
            steps=8,
        ),
        ContractCase(
            {
                "kind": "bayes_budget",
                "advantage": "baseline",
                "saturation_n": 2.0,
                "saturation_carry": 1.0,
                "decay_per": "epoch",
                "pilot_share": 0.5,
                "n_pilot": 2,
            },
            24,
        ),  # fmt: skip
        ContractCase(
            {"kind": "spo", "n": 4, "rho": 0.5, "advantage": "group", "candidate_prompts": 20}, 32
        ),
        ContractCase({"kind": "knapsack", "n": 4, "max_n": 12, "min_buffer_length": 2}, 32),
        ContractCase(
            {
                "kind": "knapsack",
                "n": 4,
                "max_n": 8,
                "min_buffer_length": 0,
                "estimate": "window",
                "arithmetic": "numba",
                "excess_to_unready": False,
                "negative_n": 0,
            },
            32,
            steps=10,
        ),  # fmt: skip
        ContractCase({"kind": "bots", "n": 4}, 32),
        ContractCase({"kind": "bots", "n": 2, "lamb": 0.5, "tau": 0.1, "target_reward": 0.3}, 16),
        ContractCase({"kind": "bots", "n": 4, "do_sample": False, "lamb": 0.0}, 32),
        ContractCase({"kind": "dps", "n": 4, "candidate_factor": 3.0}, 32),
        ContractCase(
            {
                "kind": "dps",
                "n": 2,
                "candidate_factor": 2.0,
                "decay": 1.0,
                "prior_alpha": "progress",
                "prior_pi": "2",
                "strategy": "topk+entropy",
                "entropy_weight": 0.5,
            },
            16,
        ),
        ContractCase({"kind": "dps", "n": 4, "strategy": "uniform", "update": False}, 32),
        ContractCase({"kind": "cures", "n_mean": 4}, 32),
        ContractCase({"kind": "cures", "preset": "paper"}, 64),
        ContractCase(
            {
                "kind": "cures",
                "n_mean": 4,
                "temperature": 0.01,
                "rounding": "exact",
                "size_from": "last_visit",
                "group_multiple": 2,
            },
            40,
        ),  # fmt: skip
        ContractCase({"kind": "vcrl", "n": 4}, 32, steps=10),
        ContractCase({"kind": "vcrl", "n": 3, "kappa": 0.9, "bank_size": 2}, 24, steps=10),
        ContractCase({"kind": "vcrl", "n": 4, "kappa": 0.0, "replay": False}, 32),
        ContractCase({"kind": "ar3po"}, 32),
        ContractCase({"kind": "ar3po", "round_size": 2, "max_rounds": 4}, 32, steps=10),
        ContractCase({"kind": "gdro", "n_mean": 4, "n_min": 2, "n_max": 8, "num_bins": 3}, 32),
        ContractCase({"kind": "gdro", "n_mean": 4, "n_min": 4, "n_max": 4, "dual_lr": 2.0}, 32),
        ContractCase({"kind": "hora", "n_mean": 4, "n_init": 2, "n_max": 6}, 32),
        ContractCase(
            {"kind": "hora", "n_mean": 4, "n_init": 4, "n_max": 4, "use_history": True}, 32
        ),
        ContractCase(
            {"kind": "hora", "n_mean": 6, "n_init": 1, "n_max": 12, "prior_a": 0.5}, 36, steps=10
        ),
        ContractCase({"kind": "vip", "n_mean": 4, "n_min": 2, "n_max": 8}, 32),
        ContractCase(
            {"kind": "vip", "n_mean": 4, "n_min": 3, "n_max": 6, "estimator": "dr_grpo"}, 32
        ),
        ContractCase(
            {"kind": "vip", "n_mean": 6, "n_min": 2, "n_max": 12, "kernel_shared": 0.0},
            36,
            steps=10,
        ),
        ContractCase({"kind": "vip", "preset": "paper"}, 64, steps=10),  # the official release
        ContractCase({"kind": "xrpo", "n_mean": 4, "n_init": 2, "n_max": 6}, 32),
        ContractCase({"kind": "xrpo", "n_mean": 4, "n_init": 4, "n_max": 4, "num_phases": 2}, 32),
        ContractCase(
            {
                "kind": "xrpo",
                "n_mean": 6,
                "n_init": 2,
                "n_max": 12,
                "num_phases": 4,
                "alpha": 0.1,
                "lam": 0.0,
                "bonus_clock": "rollouts",
            },
            36,
            steps=10,
        ),  # fmt: skip
        ContractCase({"kind": "speed", "n_screen": 2, "n_continue": 2, "gen_batch_factor": 2}, 32),
        ContractCase(
            {
                "kind": "speed",
                "n_screen": 2,
                "n_continue": 6,
                "continue_multiple": 3,
                "skip_batch_on_train": True,
                "on_max_gen_calls": "train",
                "max_gen_calls": 4,
            },
            32,
        ),  # fmt: skip
    ]


@dataclass
class ContractRun:
    """Drives one allocator against a fake backend one protocol call at a time, checking as it goes."""

    case: ContractCase
    seed: int
    allocator: BaseAllocator = field(init=False)
    backend: FakeBackend = field(init=False)
    trace: list[Any] = field(default_factory=list)
    step: int = 0
    in_step: bool = False
    pending: Ask | None = None
    told: dict[Any, float] = field(default_factory=dict)
    told_tokens: dict[Any, int] = field(default_factory=dict)
    trained: set[Any] = field(default_factory=set)
    parts: dict[str, int] = field(default_factory=dict)
    evicted: set[int] = field(default_factory=set)
    deferred_at: dict[int, int] = field(default_factory=dict)
    asked_in_epoch: dict[int, set[int]] = field(default_factory=dict)
    step_start_generated: tuple[int, int] = (0, 0)
    num_trained: int = 0
    stat_keys: frozenset[str] | None = None  # stats()' key set, fixed by the first step

    def __post_init__(self) -> None:
        self.backend = FakeBackend(make_pool(self.case.num_prompts), self.seed)
        self.allocator = self.case.create(seed=self.seed, oracle=self.backend.success_probabilities)

    @property
    def done(self) -> bool:
        return self.step >= self.case.steps

    # -- one protocol call ----------------------------------------------------------------
    def call(self) -> None:
        a = self.allocator
        if not self.in_step:
            a.start_step(self.step)
            self.in_step = True
            self.step_start_generated = (
                self.backend.num_generated,
                self.backend.num_generated_tokens,
            )
            self.trace.append(("start", self.step))
        elif self.pending is None:
            epoch_before = a.source.epoch
            ask = a.ask()
            if ask is None:
                self._end_step()
            else:
                self._check_ask(ask, epoch_before)
                self.pending = ask
        else:
            outcomes = self.backend.generate(self.pending)
            self.pending = None
            a.tell(outcomes)
            for o in outcomes:
                self.told.update(zip(o.refs, o.rewards.tolist(), strict=True))
                self.told_tokens.update(zip(o.refs, o.num_tokens.tolist(), strict=True))
            self.trace.append(("tell", [(o.prompt_id, o.rewards.tolist()) for o in outcomes]))
            self._note_pool([o.prompt_id for o in outcomes])
        self._check_state()

    def run(self, max_calls: int = 100_000) -> ContractRun:
        for _ in range(max_calls):
            if self.done:
                return self
            self.call()
        raise AssertionError(f"{self.case.id}: no end after {max_calls} protocol calls")

    # -- checks ---------------------------------------------------------------------------
    def _check_ask(self, ask: Ask, epoch_before: int) -> None:
        epoch = self.allocator.source.epoch
        for item in ask.items:
            p = item.prompt_id
            assert 0 <= p < self.case.num_prompts, f"asked unknown prompt {p}"
            assert p not in self.evicted, f"{self.case.id}: evicted prompt {p} asked again"
            assert self.deferred_at.get(p) != epoch, (
                f"{self.case.id}: prompt {p} deferred in epoch {epoch} asked again in that epoch"
            )
            for e in (epoch_before, epoch):
                self.asked_in_epoch.setdefault(e, set()).add(p)
        assert len(set(ask.prompt_ids)) == len(ask.items), (
            f"{self.case.id}: a prompt twice in one ask"
        )
        self.trace.append(("ask", [(i.prompt_id, i.num_rollouts, i.phase) for i in ask.items]))

    def _note_pool(self, told_prompts: list[int]) -> None:
        source = self.allocator.source.state_dict()
        self.evicted |= {int(p) for p in source["evicted"]}
        deferred = {int(p) for p in source["deferred"]}
        for p in told_prompts:  # a prompt is deferred when its outcome is told
            if p in deferred:
                self.deferred_at[p] = int(source["epoch"])

    def _end_step(self) -> None:
        a, b = self.allocator, self.backend
        groups = a.train_groups()
        self._check_groups(groups)
        step_rollouts = b.num_generated - self.step_start_generated[0]
        step_tokens = b.num_generated_tokens - self.step_start_generated[1]
        assert a.ledger.step_rollouts == step_rollouts, (
            f"{self.case.id}: ledger counts {a.ledger.step_rollouts} rollouts, backend made {step_rollouts}"
        )
        assert a.ledger.step_tokens == step_tokens
        assert a.ledger.num_rollouts == b.num_generated
        assert a.ledger.num_tokens == b.num_generated_tokens
        trained = sum(g.size for g in groups)
        self.num_trained += trained
        assert a.ledger.step_trained_rollouts == trained, (
            f"{self.case.id}: ledger counts {a.ledger.step_trained_rollouts} trained rollouts, "
            f"the groups hold {trained}"
        )
        assert a.ledger.num_trained_rollouts == self.num_trained
        self._check_breakdown(groups)
        bound = a.max_step_rollouts
        assert isinstance(bound, int) and not isinstance(bound, bool) and bound >= 1, (
            f"{self.case.id}: max_step_rollouts must be an int >= 1, got {bound!r}"
        )
        assert step_rollouts <= bound, (
            f"{self.case.id}: step {self.step} generated {step_rollouts} > bound {bound}"
        )
        floor = a.min_step_rollouts
        assert isinstance(floor, int) and 0 <= floor <= bound, (
            f"{self.case.id}: min_step_rollouts must be an int in [0, {bound}], got {floor!r}"
        )
        assert step_rollouts >= floor, (
            f"{self.case.id}: step {self.step} generated {step_rollouts} < floor {floor}"
        )
        trained_floor = a.min_step_trained
        assert isinstance(trained_floor, int) and trained_floor >= 0, (
            f"{self.case.id}: min_step_trained must be an int >= 0, got {trained_floor!r}"
        )
        assert trained >= trained_floor, (
            f"{self.case.id}: step {self.step} trained {trained} < floor {trained_floor}"
        )
        b.update(groups)  # fails on a ref the backend freed or a reward that was not told
        live = self._check_live_refs()
        b.retain(live)
        stats = self._check_stats()
        self.trace.append(("groups", [(g.prompt_id, list(g.refs)) for g in groups]))
        self.trace.append(("stats", sorted(stats.items())))
        self.in_step = False
        self.step += 1

    def _check_live_refs(self) -> set[Any]:
        """``live_refs()``: a set of rollouts told and not yet trained (a trained rollout never
        trains again, so holding it only keeps memory), the same on a second call."""
        a = self.allocator
        live = a.live_refs()
        assert isinstance(live, (set, frozenset)), (
            f"{self.case.id}: live_refs() must return a set, got {type(live).__name__}"
        )
        unknown = live - set(self.told)
        assert not unknown, (
            f"{self.case.id}: live_refs() holds refs never told: {sorted(unknown)[:5]}"
        )
        trained = live & self.trained
        assert not trained, (
            f"{self.case.id}: live_refs() holds refs already trained: {sorted(trained)[:5]}"
        )
        assert a.live_refs() == live, f"{self.case.id}: live_refs() changed on a second call"
        return set(live)

    def _check_stats(self) -> dict[str, Any]:
        """``stats()`` (docs/allocators.md, "Write your own allocator"): a dict of str keys to
        finite int/float values (no bool, str or arrays), holding the base's ``evicted``,
        ``deferred`` and ``epoch``, with the same keys at every step (a column that comes and
        goes breaks the metrics table and W&B's charts); reading it changes nothing."""
        a = self.allocator
        before = a.state_dict()
        stats = a.stats()
        assert isinstance(stats, dict), f"{self.case.id}: stats() must return a dict"
        for key, value in stats.items():
            assert isinstance(key, str) and key and key == key.strip() and " " not in key, (
                f"{self.case.id}: stats() key {key!r} must be a non-empty name without spaces"
            )
            number = isinstance(value, (int, float, np.integer, np.floating))
            assert number and not isinstance(value, (bool, np.bool_)), (
                f"{self.case.id}: stats()[{key!r}] must be an int or float, got {value!r}"
            )
            assert math.isfinite(float(value)), f"{self.case.id}: stats()[{key!r}] = {value!r}"
        missing = {"evicted", "deferred", "epoch"} - set(stats)
        assert not missing, (
            f"{self.case.id}: stats() lacks {sorted(missing)}: extend {{**super().stats(), ...}}"
        )
        if self.stat_keys is None:
            self.stat_keys = frozenset(stats)
        assert set(stats) == self.stat_keys, (
            f"{self.case.id}: stats() keys changed at step {self.step}: "
            f"{sorted(set(stats) ^ self.stat_keys)} (the key set must be the same every step)"
        )
        assert a.stats() == stats and a.state_dict() == before, (
            f"{self.case.id}: reading stats() changed the allocator"
        )
        return stats

    def _check_breakdown(self, groups: list[Group]) -> None:
        """The ledger's breakdown, recomputed from the told rollouts, the groups and the live refs."""
        where = self.allocator.ledger.where
        for g in groups:
            rewards = g.rewards.tolist()
            if g.baseline is None:
                signal = len(set(rewards)) > 1
            else:
                signal = any(r != g.baseline for r in rewards)
            part = "informative" if signal else "zero_var"
            self.parts[f"{part}_rollouts"] = self.parts.get(f"{part}_rollouts", 0) + g.size
            tokens = sum(self.told_tokens[r] for r in g.refs)
            self.parts[f"{part}_tokens"] = self.parts.get(f"{part}_tokens", 0) + tokens
            self.parts["informative_groups"] = self.parts.get("informative_groups", 0) + signal
        untrained = set(self.told) - self.trained
        live = untrained & set(self.allocator.live_refs())
        gone = untrained - live
        expected = {
            **dict.fromkeys(where.total, 0),
            **self.parts,
            "decision_rollouts": len(gone),
            "decision_tokens": sum(self.told_tokens[r] for r in gone),
            "skipped_rollouts": where.total["skipped_rollouts"],
        }
        assert where.total == expected, f"{self.case.id}: breakdown {where.total} != {expected}"
        assert set(where.held) == live, (
            f"{self.case.id}: held {sorted(where.held)} != {sorted(live)}"
        )
        parts = sum(where.total[f"{p}_rollouts"] for p in ("informative", "zero_var", "decision"))
        assert parts + where.held_rollouts == self.allocator.ledger.num_rollouts
        tokens = sum(where.total[f"{p}_tokens"] for p in ("informative", "zero_var", "decision"))
        assert tokens + where.held_tokens == self.allocator.ledger.num_tokens

    def _check_groups(self, groups: list[Group]) -> None:
        for g in groups:
            assert g.size > 0, f"{self.case.id}: empty group for prompt {g.prompt_id}"
            for ref, reward in zip(g.refs, g.rewards.tolist(), strict=True):
                assert ref in self.told, f"{self.case.id}: group uses ref {ref} never told"
                assert self.told[ref] == reward, f"{self.case.id}: ref {ref} reward changed"
                assert ref not in self.trained, f"{self.case.id}: ref {ref} trained twice"
                self.trained.add(ref)

    def _check_state(self) -> None:
        json.dumps(self.allocator.state_dict())

    def check_deferred_returned(self) -> None:
        """A prompt deferred in epoch e is asked again in epoch e + 1 (when the run saw e + 2)."""
        last = self.allocator.source.epoch
        for p, e in self.deferred_at.items():
            if e + 2 <= last:
                assert p in self.asked_in_epoch.get(e + 1, set()), (
                    f"{self.case.id}: prompt {p} deferred in epoch {e} not asked in epoch {e + 1}"
                )

    def restored(self) -> ContractRun:
        """A new run continuing from this one's JSON-round-tripped allocator and backend state."""
        twin = ContractRun(self.case, self.seed)
        twin.allocator.load_state_dict(json.loads(json.dumps(self.allocator.state_dict())))
        twin.backend.load_state_dict(json.loads(json.dumps(self.backend.state_dict())))
        names = ("step", "in_step", "pending", "step_start_generated", "num_trained", "stat_keys")
        for name in names:
            setattr(twin, name, getattr(self, name))
        twin.trace = list(self.trace)
        twin.told = dict(self.told)
        twin.told_tokens = dict(self.told_tokens)
        twin.parts = dict(self.parts)
        twin.trained = set(self.trained)
        twin.evicted = set(self.evicted)
        twin.deferred_at = dict(self.deferred_at)
        twin.asked_in_epoch = {e: set(s) for e, s in self.asked_in_epoch.items()}
        return twin


class AllocatorContract:
    """Inherit in a test module and provide a ``case`` fixture (see the module docstring)."""

    def test_invariants_hold_over_a_run(self, case: ContractCase) -> None:
        run = ContractRun(case, seed=0).run()
        run.check_deferred_returned()
        assert any(e[0] == "groups" and e[1] for e in run.trace), f"{case.id}: nothing ever trained"

    def test_same_seed_same_decisions(self, case: ContractCase) -> None:
        first = ContractRun(case, seed=3).run()
        second = ContractRun(case, seed=3).run()
        assert first.trace == second.trace
        assert first.allocator.state_dict() == second.allocator.state_dict()

    def test_state_round_trip_mid_step(self, case: ContractCase) -> None:
        reference = ContractRun(case, seed=5).run()
        calls = len([e for e in reference.trace if e[0] != "stats"])
        # cut points spread over the run: after start_step, with an ask pending, after a tell
        cuts = sorted({2, 3, 4, calls // 3, calls // 2, (2 * calls) // 3})
        assert_round_trip(case, 5, cuts, reference)


def assert_round_trip(
    case: ContractCase, seed: int, cuts: list[int], reference: ContractRun | None = None
) -> None:
    """Cutting a run after ``cut`` protocol calls and restoring it from JSON changes nothing."""
    reference = reference or ContractRun(case, seed=seed).run()
    for cut in cuts:
        run = ContractRun(case, seed)
        for _ in range(cut):
            if not run.done:
                run.call()
        twin = run.restored()
        run.run()
        twin.run()
        assert run.trace == reference.trace, f"{case.id}: cutting at call {cut} changed the run"
        assert twin.trace == reference.trace, f"{case.id}: restored at call {cut} diverged"
        assert twin.allocator.state_dict() == reference.allocator.state_dict()
        assert twin.backend.state_dict() == reference.backend.state_dict()
