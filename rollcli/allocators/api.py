"""The ask/tell protocol every allocator implements and every backend drives.

An allocator decides which prompts get how many rollouts inside one training step. It never
generates or trains: it *asks* for rollouts, is *told* their rewards, and finally names the
*training groups*. One step, as the generic loop (and verl's trainer) drives it::

    allocator.start_step(step)
    while (ask := allocator.ask()) is not None:
        allocator.tell(backend.generate(ask))
    groups = allocator.train_groups()          # ends the step
    backend.update(groups)
    backend.retain(allocator.live_refs())      # the backend may free every other rollout

This module holds the small value types of that protocol, the budget ledger and the abstract
base class; the prompt source (epoch order, deferral, eviction, random draws) lives in
:mod:`rollcli.allocators.source` and is re-exported here. Pure Python + numpy.
"""

from __future__ import annotations

import abc
import dataclasses
import math
from collections import deque
from collections.abc import Collection, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import repeat
from typing import Any, ClassVar

import numpy as np

from rollcli.allocators.breakdown import RolloutBreakdown
from rollcli.allocators.source import PromptSource

__all__ = [
    "AllocatorError",
    "AskItem",
    "Ask",
    "Outcome",
    "Group",
    "BudgetLedger",
    "PromptSource",
    "BaseAllocator",
    "OracleFn",
    "config_kind",
]

# A backend's opaque handle on one generated rollout. Backends use ints; the allocator only
# stores and returns them. They must be JSON-serialisable so allocator state can be saved.
RolloutRef = Hashable
# Sim-only: returns the true success probability of each requested prompt under the current policy.
OracleFn = Any  # Callable[[np.ndarray], np.ndarray]


class AllocatorError(RuntimeError):
    """An allocator was driven against its protocol or cannot continue (e.g. max rounds hit)."""


# The value types below are frozen dataclasses (fields, repr, equality, hashing, replace() as
# usual) with ``__slots__`` and a hand-written ``__init__`` (same signature, same checks). A step
# builds one of each per prompt, so construction is on the hot path: slots halve the objects the
# garbage collector tracks, and ``__init__`` fills each slot through its descriptor's setter
# (``_setters`` below), which is what a frozen ``__init__`` must do, without ``__post_init__``
# and without looking each field up by name in ``object.__setattr__``.
# (Measured: the plain dataclass ``__init__`` with ``__post_init__`` costs ~13 % of the sim loop's
# steps/s at 512 x 8; docs/LOG.md, issue 15.) Each also has a ``many`` classmethod that builds a
# whole step's worth from columns with the same checks done column-wise: it fills one field of
# every instance at a time, with no ``__init__`` call per object (2-2.5x faster at 512 items).


@dataclass(frozen=True, init=False, slots=True)
class AskItem:
    """Generate ``num_rollouts`` rollouts of ``prompt_id``, tagged with a phase (pilot, commit, ...)."""

    prompt_id: int
    num_rollouts: int
    phase: str = "main"

    def __init__(self, prompt_id: int, num_rollouts: int, phase: str = "main") -> None:
        if num_rollouts <= 0:
            raise ValueError(f"num_rollouts must be positive, got {num_rollouts}")
        _askitem_set[0](self, prompt_id)
        _askitem_set[1](self, num_rollouts)
        _askitem_set[2](self, phase)

    @classmethod
    def many(
        cls, prompt_ids: Sequence[int], num_rollouts: int | Sequence[int], phase: str = "main"
    ) -> list[AskItem]:
        """``[AskItem(p, num_rollouts, phase) for p in prompt_ids]``, built column-wise;
        ``num_rollouts`` is one count for all or one per prompt (ints)."""
        n = len(prompt_ids)
        if isinstance(num_rollouts, Sequence):
            if len(num_rollouts) != n:
                raise ValueError(f"{len(num_rollouts)} counts for {n} prompts")
            low = min(num_rollouts, default=1)
            counts: Iterable[int] = num_rollouts
        else:
            low, counts = num_rollouts, repeat(num_rollouts, n)
        if low <= 0:
            raise ValueError(f"num_rollouts must be positive, got {low}")
        return _build(cls, n, prompt_ids, counts, repeat(phase, n))


@dataclass(frozen=True)
class Ask:
    """One generation request. One ask may mix phases (Pilot-Commit's binding does)."""

    items: tuple[AskItem, ...]

    @property
    def num_rollouts(self) -> int:
        return sum(item.num_rollouts for item in self.items)

    @property
    def prompt_ids(self) -> list[int]:
        return [item.prompt_id for item in self.items]

    def __len__(self) -> int:
        return len(self.items)


@dataclass(frozen=True, init=False, slots=True)
class Outcome:
    """What the backend generated for one :class:`AskItem`, in the same order as the ask.

    ``rewards`` is the *verifiable* score (1.0 correct, 0.0 wrong for binary tasks),
    ``num_tokens`` the generated token count of each rollout, ``policy_version`` the number of
    policy updates the generating weights had seen, ``refs`` one opaque handle per rollout.
    """

    prompt_id: int
    phase: str
    rewards: np.ndarray
    num_tokens: np.ndarray
    policy_version: int
    refs: tuple[RolloutRef, ...]

    def __init__(
        self,
        prompt_id: int,
        phase: str,
        rewards: np.ndarray,
        num_tokens: np.ndarray,
        policy_version: int,
        refs: tuple[RolloutRef, ...],
    ) -> None:
        n = len(refs)
        if len(rewards) != n or len(num_tokens) != n:
            raise ValueError(
                f"outcome of prompt {prompt_id}: {len(rewards)} rewards, "
                f"{len(num_tokens)} token counts and {n} refs must be equal"
            )
        _outcome_set[0](self, prompt_id)
        _outcome_set[1](self, phase)
        _outcome_set[2](self, rewards)
        _outcome_set[3](self, num_tokens)
        _outcome_set[4](self, policy_version)
        _outcome_set[5](self, refs)

    @classmethod
    def many(
        cls,
        prompt_ids: Sequence[int],
        phases: Sequence[str],
        rewards: Sequence[np.ndarray],
        num_tokens: Sequence[np.ndarray],
        policy_version: int,
        refs: Sequence[tuple[RolloutRef, ...]],
    ) -> list[Outcome]:
        """One :class:`Outcome` per position of the columns (one policy version), built
        column-wise with the constructor's check."""
        n = len(prompt_ids)
        if not len(phases) == len(rewards) == len(num_tokens) == len(refs) == n:
            raise ValueError("Outcome.many: every column must have one entry per prompt")
        counts = list(map(len, refs))
        if list(map(len, rewards)) != counts or list(map(len, num_tokens)) != counts:
            for args in zip(prompt_ids, phases, rewards, num_tokens, repeat(0), refs):
                cls(*args)  # raises, naming the first inconsistent outcome
        return _build(
            cls, n, prompt_ids, phases, rewards, num_tokens, repeat(policy_version, n), refs
        )

    @property
    def num_rollouts(self) -> int:
        return len(self.refs)


@dataclass(frozen=True, init=False, slots=True)
class Group:
    """One GRPO group to train on: a prompt and the rollouts whose rewards are normalised together.

    ``rewards`` are aligned with ``refs`` so a backend can compute advantages without a lookup.
    Groups may have different sizes (VIGOR) and may join rollouts of several phases or policy
    versions (Pilot-Commit trains a prompt's pilot and commit rollouts as one group).

    The advantage rule every backend applies (sim, tiny and verl alike):

    * ``baseline is None`` (the default): GRPO's, over exactly the group's rollouts,
      ``A_i = (r_i - mean) / (std + eps)`` (or ``r_i - mean`` where the backend turns std
      normalisation off). An allocator that generates more than it trains (PODS: n generated,
      m kept) puts only the kept rollouts in the group, so the advantage is normalised over
      that subset; the rest are generated-only rollouts, counted by the ledger as generated and
      not as trained.
    * ``baseline`` a number: ``A_i = r_i - baseline``, no std division and no group mean
      (Reinforce-Ada's global-statistics advantage: the baseline is the success rate over every
      rollout drawn for the prompt, trained or not). A group of one rollout then trains too.
    """

    prompt_id: int
    refs: tuple[RolloutRef, ...]
    rewards: np.ndarray
    baseline: float | None = None

    def __init__(
        self,
        prompt_id: int,
        refs: tuple[RolloutRef, ...],
        rewards: np.ndarray,
        baseline: float | None = None,
    ) -> None:
        _group_set[0](self, prompt_id)
        _group_set[1](self, refs)
        _group_set[2](self, rewards)
        if baseline is not None:
            baseline = float(baseline)
            if not math.isfinite(baseline):
                raise ValueError(
                    f"group of prompt {prompt_id}: baseline must be finite, got {baseline}"
                )
        _group_set[3](self, baseline)

    @classmethod
    def many(
        cls,
        prompt_ids: Sequence[int],
        refs: Sequence[tuple[RolloutRef, ...]],
        rewards: Sequence[np.ndarray],
    ) -> list[Group]:
        """GRPO groups (no baseline), one per position of the columns, built column-wise."""
        n = len(prompt_ids)
        if not len(refs) == len(rewards) == n:
            raise ValueError("Group.many: every column must have one entry per prompt")
        return _build(cls, n, prompt_ids, refs, rewards, repeat(None, n))

    @property
    def size(self) -> int:
        return len(self.refs)

    @property
    def reward_variance(self) -> float:
        """Population variance of the group's rewards (0 for a group that teaches nothing)."""
        return float(np.var(self.rewards)) if len(self.rewards) else 0.0


def _setters(cls: type) -> tuple[Any, ...]:
    """The slot setters of a frozen slots dataclass, in field order (for its ``__init__``)."""
    return tuple(cls.__dict__[f.name].__set__ for f in dataclasses.fields(cls))


_askitem_set = _setters(AskItem)
_outcome_set = _setters(Outcome)
_group_set = _setters(Group)
_SETTERS = {AskItem: _askitem_set, Outcome: _outcome_set, Group: _group_set}


def _build(cls: type, n: int, *columns: Iterable[Any]) -> list[Any]:
    """``n`` instances of ``cls`` (one of the value types above), one column per field in field
    order, already checked by the caller: every slot is set exactly as ``__init__`` sets it."""
    out = list(map(object.__new__, repeat(cls, n)))
    for setter, column in zip(_SETTERS[cls], columns, strict=True):
        deque(map(setter, out, column), maxlen=0)  # consume: one C-level pass per field
    return out


@dataclass
class BudgetLedger:
    """Counts every generated rollout and token, and the rollouts that went into training groups.

    Generated counts include discarded pilots and rejected groups; trained counts are the
    rollouts of the groups :meth:`BaseAllocator.train_groups` returned. Their difference is
    what an allocator generated and did not train on (DAPO's dropped groups, the pilots of
    Pilot-Commit's rejected prompts, the n - m rollouts PODS leaves out). ``where`` splits
    them further (:mod:`rollcli.allocators.breakdown`): informative, zero-variance, decision-only
    and held, in rollouts and tokens, plus the rollouts a history-based allocator skipped.
    """

    num_rollouts: int = 0
    num_tokens: int = 0
    step_rollouts: int = 0
    step_tokens: int = 0
    step_groups: int = 0
    step_zero_variance_groups: int = 0
    num_trained_rollouts: int = 0
    step_trained_rollouts: int = 0
    where: RolloutBreakdown = dataclasses.field(
        default_factory=RolloutBreakdown, repr=False, compare=False
    )

    def start_step(self) -> None:
        self.step_rollouts = self.step_tokens = 0
        self.step_groups = self.step_zero_variance_groups = 0
        self.step_trained_rollouts = 0
        self.where.start_step()

    def record(self, outcomes: Iterable[Outcome]) -> None:
        outcomes = list(outcomes)
        counts = [len(o.refs) for o in outcomes]
        if 0 in counts:
            outcomes = [o for o, n in zip(outcomes, counts, strict=True) if n]
            counts = [n for n in counts if n]
        if not outcomes:
            return
        # one vectorised pass over all groups: a step can hold tens of thousands of prompts
        sizes = np.array(counts, dtype=np.int64)
        starts = np.zeros_like(sizes)
        np.cumsum(sizes[:-1], out=starts[1:])
        rewards = np.concatenate([o.rewards for o in outcomes]).astype(float, copy=False)
        token_arrays = [o.num_tokens for o in outcomes]
        token_sums = np.add.reduceat(np.concatenate(token_arrays).astype(np.int64), starts)
        tokens = int(token_sums.sum())
        varied = np.maximum.reduceat(rewards, starts) > np.minimum.reduceat(rewards, starts)
        self.where.told([o.refs for o in outcomes], token_arrays, token_sums, varied)
        flat = ~varied & (sizes > 1)
        rollouts = int(sizes.sum())
        self.num_rollouts += rollouts
        self.step_rollouts += rollouts
        self.num_tokens += tokens
        self.step_tokens += tokens
        self.step_groups += len(outcomes)
        self.step_zero_variance_groups += int(flat.sum())

    def record_trained(
        self, groups: Sequence[Group], live: Collection[RolloutRef] = frozenset()
    ) -> None:
        """Count the rollouts of this step's training groups; ``live`` are the untrained
        rollouts the allocator may still train later (its :meth:`BaseAllocator.live_refs`)."""
        trained = sum([len(g.refs) for g in groups])
        self.num_trained_rollouts += trained
        self.step_trained_rollouts += trained
        self.where.trained(groups, live)

    def record_skipped(self, rollouts: int) -> None:
        """Rollouts a history-based allocator chose not to generate (GRESO's skipped prompts)."""
        self.where.skipped(rollouts)

    def state_dict(self) -> dict[str, Any]:
        state: dict[str, Any] = {k: v for k, v in self.__dict__.items() if k != "where"}
        state["where"] = self.where.state_dict()
        return state

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        # a counter missing from the state (a checkpoint written before it existed) restarts at 0
        for key in self.__dict__:
            if key != "where":
                setattr(self, key, int(state.get(key, 0)))
        self.where.load_state_dict(state.get("where"))


class BaseAllocator(abc.ABC):
    """Base class of every allocator: drives the ledger, checks the protocol, saves the state.

    A subclass names its frozen config dataclass in ``config_class``; the config's
    ``kind: Literal["<kind>"] = "<kind>"`` field is the one place a kind is named (``kind`` here
    and the registry key are read from it). It implements the hooks below; the public protocol
    methods (:meth:`start_step`, :meth:`ask`, :meth:`tell`, :meth:`train_groups`) wrap them with
    the protocol checks and the ledger, so a hook never sees an out-of-order call.

    Required:
      * :attr:`max_step_rollouts` -- the most rollouts one step may generate (an int);
      * :meth:`_ask`, :meth:`_tell`, :meth:`_train_groups` -- one step of the algorithm.
    Optional: :meth:`_start_step`, :meth:`_state` / :meth:`_load_state`, :meth:`live_refs`,
    :meth:`stats`, and the class attributes ``presets`` and ``requires_oracle``.

    Available to the hooks: ``self.config``, ``self.rollouts_per_step`` (the spec's per-step
    budget; each allocator turns it into a batch size and raises ``ValueError`` naming the knob
    when it does not divide, :meth:`prompts_per_step` for a fixed count per prompt), ``self.source`` (:class:`PromptSource`: ``take`` in epoch order,
    ``sample`` at random, ``defer``, ``evict``), ``self.rng`` (seeded from the run seed, saved
    in the state: use it for every random choice), ``self.step`` (0-based), ``self.ledger`` and,
    for ``requires_oracle`` allocators, ``self.oracle``.
    """

    #: The frozen config dataclass of this kind (see docs/CONTRACTS.md §1).
    config_class: ClassVar[type]
    #: The kind, read from ``config_class``'s ``kind`` field when the subclass is created.
    kind: ClassVar[str]
    #: Published settings: preset name -> knob values (explicit knobs override them).
    presets: ClassVar[Mapping[str, Mapping[str, Any]]] = {}
    #: Prompts trained per step in the paper a preset comes from (preset name -> count):
    #: ``rollcli validate``/``plan`` warn when a spec runs the preset at far fewer.
    preset_prompts_per_step: ClassVar[Mapping[str, int]] = {}
    #: Needs the true success probabilities (the sim backend's), passed in as ``oracle``.
    requires_oracle: ClassVar[bool] = False

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        config_class = cls.__dict__.get("config_class")
        if config_class is not None:
            kind = config_kind(config_class)
            declared = cls.__dict__.get("kind")
            if declared is not None and declared != kind:
                raise TypeError(
                    f"{cls.__name__}.kind = {declared!r} but its config_class "
                    f"{config_class.__name__} names kind {kind!r}; drop the class attribute"
                )
            cls.kind = kind

    def __init__(
        self,
        config: Any,
        *,
        num_prompts: int,
        rollouts_per_step: int,
        seed: int,
        oracle: OracleFn | None = None,
    ) -> None:
        config_class = getattr(type(self), "config_class", None)
        if config_class is not None and not isinstance(config, config_class):
            raise TypeError(
                f"{type(self).__name__} takes a {config_class.__name__}, "
                f"got {type(config).__name__}"
            )
        if rollouts_per_step <= 0:
            raise ValueError(f"rollouts_per_step must be positive, got {rollouts_per_step}")
        if self.requires_oracle and oracle is None:
            raise AllocatorError(
                f"allocator '{self.kind}' needs the true success probabilities; "
                "only the sim backend provides them"
            )
        self.config = config
        self.rollouts_per_step = rollouts_per_step
        self.seed = seed
        self.oracle = oracle
        self.source = PromptSource(num_prompts=num_prompts, seed=seed)
        self.ledger = BudgetLedger()
        self.rng = np.random.default_rng([seed, 0xA110C])
        self.step = -1
        self._pending: Ask | None = None
        self._in_step = False

    @property
    @abc.abstractmethod
    def max_step_rollouts(self) -> int:
        """The most rollouts one step may generate; the contract suite holds every step to it.

        ``rollouts_per_step`` for an allocator that keeps to the budget. An allocator that
        overspends by design states its bound (DAPO: every generation batch it may refill;
        Pilot-Commit: every round's pilots plus one batch of commits). Always an int.
        """

    def prompts_per_step(self, per_prompt: int, knob: str) -> int:
        """``rollouts_per_step // per_prompt``: the batch size of an allocator that spends
        ``per_prompt`` rollouts on each prompt; ``ValueError`` naming ``knob`` (e.g. ``"n=8"``)
        when it does not divide."""
        if self.rollouts_per_step % per_prompt:
            raise ValueError(
                f"{self.kind}: rollouts_per_step={self.rollouts_per_step} is not divisible by "
                f"{knob}"
            )
        return self.rollouts_per_step // per_prompt

    @property
    def min_step_rollouts(self) -> int:
        """The fewest rollouts one step generates; the contract suite holds every step to it.

        0 (the default) when the allocator states no floor. With :attr:`max_step_rollouts` it is
        the range ``rollcli plan`` multiplies by the steps for its generated-rollouts estimate
        (equal to it: the allocator fixes what it generates, as GRPO does).
        """
        return 0

    @property
    def min_step_trained(self) -> int:
        """The fewest rollouts one step trains; the contract suite holds every step to it.

        0 (the default): the allocator may train fewer than the budget (a drained pool, rounds
        that stop early), so ``rollcli plan`` shows the trained budget as a bound (``<= x``).
        """
        return 0

    # -- protocol -------------------------------------------------------------------------
    def start_step(self, step: int) -> None:
        """Begin training step ``step`` (0-based)."""
        if self._in_step:
            raise AllocatorError("start_step() called before train_groups() ended the last step")
        self.step = step
        self._in_step = True
        self.ledger.start_step()
        self._start_step()

    def ask(self) -> Ask | None:
        """The next generation request of this step, or None when the training batch is complete."""
        if not self._in_step:
            raise AllocatorError("ask() outside a step: call start_step() first")
        if self._pending is not None:
            raise AllocatorError("ask() called twice without tell()")
        ask = self._ask()
        if ask is not None and len(ask.items) == 0:
            ask = None
        self._pending = ask
        return ask

    def tell(self, outcomes: Sequence[Outcome]) -> None:
        """Report the outcomes of the pending ask, one per ask item, in order."""
        ask = self._pending
        if ask is None:
            raise AllocatorError("tell() without a pending ask")
        items = ask.items
        if len(outcomes) != len(items):
            raise AllocatorError(f"ask had {len(items)} items, told {len(outcomes)} outcomes")
        # compared as whole lists (a step can tell thousands of outcomes); the loop finds the culprit
        if [i.prompt_id for i in items] != [o.prompt_id for o in outcomes] or [
            i.num_rollouts for i in items
        ] != [len(o.refs) for o in outcomes]:
            for item, outcome in zip(items, outcomes, strict=True):
                if item.prompt_id != outcome.prompt_id or item.num_rollouts != outcome.num_rollouts:
                    raise AllocatorError(
                        f"outcome for prompt {outcome.prompt_id} ({outcome.num_rollouts} rollouts) "
                        f"does not answer ask item {item.prompt_id} ({item.num_rollouts} rollouts)"
                    )
        self._pending = None
        self.ledger.record(outcomes)
        self._tell(list(outcomes))

    def train_groups(self) -> list[Group]:
        """The groups to train on; ends the step (the ledger counts their rollouts as trained)."""
        if not self._in_step:
            raise AllocatorError("train_groups() outside a step")
        if self._pending is not None:
            raise AllocatorError("train_groups() with an ask still pending")
        groups = self._train_groups()
        self.ledger.record_trained(groups, self.live_refs())
        self._in_step = False
        return groups

    def live_refs(self) -> set[RolloutRef]:
        """Rollouts the allocator may still put into a future group (replay buffers, bound commits).

        Called after each step's update; the backend frees every other rollout. Override when
        rollouts of this step may train in a later one; the default (none) suits allocators
        whose groups all train in the step that generated them.
        """
        return set()

    def stats(self) -> dict[str, float]:
        """Counters for the metrics row (evicted, deferred, buffer sizes, rounds, ...).

        Extend with ``{**super().stats(), "my_counter": x}``; every key except ``evicted``,
        ``deferred`` and ``epoch`` goes into the row as ``alloc/<key>``; values are finite numbers.
        """
        return {
            "evicted": self.source.num_evicted,
            "deferred": self.source.num_deferred,
            "epoch": self.source.epoch,
        }

    # -- state ----------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """A JSON-serialisable snapshot; valid at any point between protocol calls."""
        return {
            "kind": self.kind,
            "step": self.step,
            "in_step": self._in_step,
            "pending": None
            if self._pending is None
            else [[i.prompt_id, i.num_rollouts, i.phase] for i in self._pending.items],
            "source": self.source.state_dict(),
            "ledger": self.ledger.state_dict(),
            "rng": self.rng.bit_generator.state,
            "algorithm": self._state(),
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore a :meth:`state_dict`; the driver then re-generates a pending ask, if any."""
        if state["kind"] != self.kind:
            raise ValueError(f"checkpoint is of allocator '{state['kind']}', not '{self.kind}'")
        self.step = int(state["step"])
        self._in_step = bool(state["in_step"])
        pending = state["pending"]
        self._pending = (
            None
            if pending is None
            else Ask(tuple(AskItem(int(p), int(n), str(ph)) for p, n, ph in pending))
        )
        self.source.load_state_dict(state["source"])
        self.ledger.load_state_dict(state["ledger"])
        self.rng.bit_generator.state = state["rng"]
        self._load_state(state["algorithm"])

    # -- hooks to implement -----------------------------------------------------------------
    def _start_step(self) -> None:  # noqa: B027 - optional hook
        """Reset per-step state. Called by :meth:`start_step`; ``self.step`` is already set."""

    @abc.abstractmethod
    def _ask(self) -> Ask | None:
        """The next generation request of this step, or None when the step's groups are complete.

        Called again after each :meth:`_tell` until it returns None (an ask with no items counts
        as None). One ask may mix phases (tags of your choosing) and prompts of several epochs,
        but never holds a prompt twice. Take prompts from ``self.source`` and draw randomness
        from ``self.rng``; a step that may never end must give up after a stated number of asks.
        """

    @abc.abstractmethod
    def _tell(self, outcomes: list[Outcome]) -> None:
        """Take in the outcomes of the last ask, one per item, in ask order.

        The ledger has already counted them. Decide here what each prompt's rollouts become:
        a training group, a buffer entry, deferral (``self.source.defer``) or eviction
        (``self.source.evict``); keep the ``Outcome`` objects you may put in a group.
        """

    @abc.abstractmethod
    def _train_groups(self) -> list[Group]:
        """The groups this step trains on (each rollout at most once over the whole run).

        Called once :meth:`_ask` returned None. Group refs and rewards must be those the
        outcomes told; a group may carry a ``baseline`` (see :class:`Group`). Groups may be empty.
        """

    def _state(self) -> dict[str, Any]:
        """Everything the algorithm keeps beyond source, ledger and RNG, as JSON-safe data.

        Must be valid between any two protocol calls, even with an ask pending. The helpers in
        :mod:`rollcli.allocators.state` turn outcomes, groups, numpy arrays and per-prompt
        dictionaries into plain lists and back.
        """
        return {}

    def _load_state(self, state: Mapping[str, Any]) -> None:  # noqa: B027 - optional hook
        """Restore what :meth:`_state` returned (after a JSON round trip)."""


def config_kind(config_class: type) -> str:
    """The kind a config dataclass names: its ``kind`` field's default, a ``Literal`` of itself."""
    fields = getattr(config_class, "__dataclass_fields__", None)
    kind = fields.get("kind") if fields else None
    if kind is None or not isinstance(kind.default, str) or not kind.default:
        raise TypeError(
            f"{getattr(config_class, '__name__', config_class)} must be a dataclass with a field "
            "kind: Literal['<kind>'] = '<kind>'"
        )
    return kind.default
