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

This module holds the small value types of that protocol, the prompt source (epoch order,
deferral, eviction), the budget ledger and the abstract base class. Pure Python + numpy.
"""

from __future__ import annotations

import abc
import dataclasses
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

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

    @property
    def num_rollouts(self) -> int:
        return len(self.refs)


@dataclass(frozen=True, init=False, slots=True)
class Group:
    """One GRPO group to train on: a prompt and the rollouts whose rewards are normalised together.

    ``rewards`` are aligned with ``refs`` so a backend can compute advantages without a lookup.
    Groups may have different sizes (VIGOR) and may join rollouts of several phases or policy
    versions (Pilot-Commit trains a prompt's pilot and commit rollouts as one group).
    """

    prompt_id: int
    refs: tuple[RolloutRef, ...]
    rewards: np.ndarray

    def __init__(self, prompt_id: int, refs: tuple[RolloutRef, ...], rewards: np.ndarray) -> None:
        _group_set[0](self, prompt_id)
        _group_set[1](self, refs)
        _group_set[2](self, rewards)

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


@dataclass
class BudgetLedger:
    """Counts every generated rollout and token, including discarded pilots and rejected groups."""

    num_rollouts: int = 0
    num_tokens: int = 0
    step_rollouts: int = 0
    step_tokens: int = 0
    step_groups: int = 0
    step_zero_variance_groups: int = 0

    def start_step(self) -> None:
        self.step_rollouts = self.step_tokens = 0
        self.step_groups = self.step_zero_variance_groups = 0

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
        tokens = int(np.concatenate([o.num_tokens for o in outcomes]).sum())
        flat = (np.maximum.reduceat(rewards, starts) == np.minimum.reduceat(rewards, starts)) & (
            sizes > 1
        )
        rollouts = int(sizes.sum())
        self.num_rollouts += rollouts
        self.step_rollouts += rollouts
        self.num_tokens += tokens
        self.step_tokens += tokens
        self.step_groups += len(outcomes)
        self.step_zero_variance_groups += int(flat.sum())

    def state_dict(self) -> dict[str, int]:
        return dict(self.__dict__)

    def load_state_dict(self, state: Mapping[str, int]) -> None:
        for key in self.__dict__:
            setattr(self, key, int(state[key]))


@dataclass
class PromptSource:
    """The training pool: a fresh random order each epoch, prompts deferred or evicted.

    ``take(k)`` returns up to ``k`` prompts of the current epoch not yet handed out, starting a
    new epoch (new permutation, deferred prompts back in) when the epoch is exhausted and
    ``wrap`` is true. Deferred prompts skip the rest of this epoch; evicted ones never return.

    Internally a numpy copy of the order and a mask of the prompts that are deferred or evicted
    let ``take`` and ``remaining_in_epoch`` scan the order vectorised; the sets stay the truth
    (state, counts) and every change to them goes through the methods below.
    """

    num_prompts: int
    seed: int
    epoch: int = 0
    _order: list[int] = field(default_factory=list)
    _cursor: int = 0
    _deferred: set[int] = field(default_factory=set)
    _evicted: set[int] = field(default_factory=set)

    def __post_init__(self) -> None:
        if self.num_prompts <= 0:
            raise ValueError("the prompt pool is empty")
        if self._order:
            self._sync(np.asarray(self._order, dtype=np.int64))
        else:
            self._sync(self._permutation(self.epoch))

    def _permutation(self, epoch: int) -> np.ndarray:
        return np.random.default_rng([self.seed, epoch]).permutation(self.num_prompts)

    def _sync(self, order: np.ndarray) -> None:
        """Set the epoch's order; rebuild the blocked mask from the two sets."""
        self._order_arr = order
        self._order = order.tolist()
        self._blocked = np.zeros(self.num_prompts, dtype=bool)
        for prompt in self._deferred | self._evicted:
            self._block(prompt)

    def _block(self, prompt_id: int) -> None:
        if 0 <= prompt_id < self.num_prompts:  # other ids never occur in the order
            self._blocked[prompt_id] = True

    @property
    def num_active(self) -> int:
        return self.num_prompts - len(self._evicted)

    @property
    def num_evicted(self) -> int:
        return len(self._evicted)

    @property
    def num_deferred(self) -> int:
        return len(self._deferred)

    def is_evicted(self, prompt_id: int) -> bool:
        return prompt_id in self._evicted

    def remaining_in_epoch(self) -> int:
        rest = self._order_arr[self._cursor :]
        if not (self._deferred or self._evicted):
            return int(rest.size)
        return int(rest.size - np.count_nonzero(self._blocked[rest]))

    def take(self, k: int, *, wrap: bool = True) -> list[int]:
        """Hand out up to ``k`` prompts; crossing an epoch boundary starts the next epoch.

        At most one boundary is crossed per call, so ``k`` larger than the active pool returns
        fewer prompts (each once) instead of looping over epochs.
        """
        taken = self._scan(k, ())
        if len(taken) < k and wrap and self.num_active != 0:
            # _scan stopped short only at the end of the epoch
            self.new_epoch()
            if self.remaining_in_epoch() > 0:
                taken += self._scan(k - len(taken), taken)
        return taken

    def _scan(self, need: int, exclude: Sequence[int]) -> list[int]:
        """Up to ``need`` prompts of this epoch from the cursor on, skipping blocked and ``exclude``.

        The cursor ends just past the last prompt taken, or at the end of the epoch.
        """
        order, cursor = self._order_arr, self._cursor
        size = order.size
        if need <= 0 or cursor >= size:
            return []
        if not (self._deferred or self._evicted or exclude):
            end = min(cursor + need, size)
            self._cursor = end
            return order[cursor:end].tolist()
        blocked = self._blocked
        if exclude:
            blocked = blocked.copy()
            blocked[np.asarray(exclude, dtype=np.int64)] = True
        taken: list[int] = []
        chunk = max(2 * need, 256)
        while need > 0 and cursor < size:
            window = order[cursor : cursor + chunk]
            free = np.flatnonzero(~blocked[window])
            if free.size >= need:
                taken += window[free[:need]].tolist()
                cursor += int(free[need - 1]) + 1
                need = 0
            else:
                taken += window[free].tolist()
                cursor += window.size
                need -= free.size
                chunk *= 2
        self._cursor = cursor
        return taken

    def new_epoch(self) -> None:
        """Start the next epoch: new order, deferred prompts come back."""
        self.epoch += 1
        self._cursor = 0
        self._deferred.clear()
        self._sync(self._permutation(self.epoch))

    def defer(self, prompt_id: int) -> None:
        """Skip this prompt for the rest of the epoch; it returns in the next one."""
        if prompt_id not in self._evicted:
            self._deferred.add(prompt_id)
            self._block(prompt_id)

    def evict(self, prompt_id: int) -> None:
        """Remove this prompt from the pool for the rest of training."""
        self._evicted.add(prompt_id)
        self._deferred.discard(prompt_id)
        self._block(prompt_id)

    def state_dict(self) -> dict[str, Any]:
        return {
            "num_prompts": self.num_prompts,
            "seed": self.seed,
            "epoch": self.epoch,
            "cursor": self._cursor,
            "deferred": sorted(self._deferred),
            "evicted": sorted(self._evicted),
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        if int(state["num_prompts"]) != self.num_prompts:
            raise ValueError(
                f"checkpoint has a pool of {state['num_prompts']} prompts, this run {self.num_prompts}"
            )
        self.seed = int(state["seed"])
        self.epoch = int(state["epoch"])
        self._cursor = int(state["cursor"])
        self._deferred = {int(p) for p in state["deferred"]}
        self._evicted = {int(p) for p in state["evicted"]}
        self._sync(self._permutation(self.epoch))


class BaseAllocator(abc.ABC):
    """Base class of every allocator: drives the ledger and checks the protocol.

    Subclasses implement :meth:`_start_step`, :meth:`_ask`, :meth:`_tell`, :meth:`_train_groups`
    and the ``_state``/``_load_state`` pair for whatever they keep beyond the prompt source,
    ledger and RNG. ``rollouts_per_step`` is the spec's per-step budget; each allocator turns it
    into a batch size as its algorithm needs (and says so in its config docstring).
    """

    kind: ClassVar[str]
    requires_oracle: ClassVar[bool] = False

    def __init__(
        self,
        config: Any,
        *,
        num_prompts: int,
        rollouts_per_step: int,
        seed: int,
        oracle: OracleFn | None = None,
    ) -> None:
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
        """The groups to train on; ends the step."""
        if not self._in_step:
            raise AllocatorError("train_groups() outside a step")
        if self._pending is not None:
            raise AllocatorError("train_groups() with an ask still pending")
        groups = self._train_groups()
        self._in_step = False
        return groups

    def live_refs(self) -> set[RolloutRef]:
        """Rollouts the allocator may still put into a future group (replay buffers, bound commits)."""
        return set()

    def stats(self) -> dict[str, float]:
        """Counters for the metrics row (evicted, deferred, buffer sizes, rounds, ...)."""
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

    # -- to implement -----------------------------------------------------------------------
    def _start_step(self) -> None:  # noqa: B027 - optional hook
        """Reset per-step state."""

    @abc.abstractmethod
    def _ask(self) -> Ask | None: ...

    @abc.abstractmethod
    def _tell(self, outcomes: list[Outcome]) -> None: ...

    @abc.abstractmethod
    def _train_groups(self) -> list[Group]: ...

    def _state(self) -> dict[str, Any]:
        return {}

    def _load_state(self, state: Mapping[str, Any]) -> None:  # noqa: B027 - optional hook
        pass
