"""The training pool every allocator draws from: epoch order, deferral, eviction, random draws.

:class:`PromptSource` hands prompts out in a fresh random order each epoch (``take``), or draws
them at random from the whole active pool (``sample``) for allocators that do not walk epochs.
It keeps which prompts are deferred to the next epoch and which are evicted for good, and saves
all of it in a JSON-safe ``state_dict``. Pure Python + numpy; re-exported by
:mod:`rollcli.allocators.api`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = ["PromptSource"]


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

    def is_deferred(self, prompt_id: int) -> bool:
        return prompt_id in self._deferred

    def active_prompts(self, *, include_deferred: bool = False) -> np.ndarray:
        """The pool's prompts that may be asked now, ascending ids (int64).

        Evicted prompts are never in it; deferred ones only with ``include_deferred`` (a
        deferred prompt must not be asked again in its epoch). Independent of the epoch order
        and cursor: allocators that draw from the whole pool (MoPPS, SPO) or score all of it
        (the oracle) use this instead of :meth:`take`.
        """
        if include_deferred:
            if not self._evicted:
                return np.arange(self.num_prompts, dtype=np.int64)
            mask = np.ones(self.num_prompts, dtype=bool)
            mask[np.fromiter(self._evicted, np.int64, len(self._evicted))] = False
            return np.flatnonzero(mask)
        if not (self._deferred or self._evicted):
            return np.arange(self.num_prompts, dtype=np.int64)
        return np.flatnonzero(~self._blocked)

    def sample(
        self,
        k: int,
        rng: np.random.Generator,
        *,
        weights: np.ndarray | None = None,
        include_deferred: bool = False,
    ) -> list[int]:
        """Draw ``min(k, active)`` distinct prompts of :meth:`active_prompts` with ``rng``.

        Uniform without ``weights``; otherwise with probability proportional to
        ``weights[prompt_id]`` (an array over the whole pool, ``num_prompts`` long, >= 0;
        entries of prompts that are not active are ignored), as ``rng.choice(replace=False)``
        draws. The order of the result is the draw order. Pass the allocator's ``self.rng`` so
        the draw is seeded and saved with its state. The epoch order and cursor do not move.
        """
        if k < 0:
            raise ValueError(f"sample(k): k must be >= 0, got {k}")
        active = self.active_prompts(include_deferred=include_deferred)
        size = min(k, active.size)
        if size == 0:
            return []
        if weights is None:
            return rng.choice(active, size=size, replace=False).tolist()
        w = np.asarray(weights, dtype=float)
        if w.shape != (self.num_prompts,):
            raise ValueError(
                f"sample(weights=): expected one weight per prompt ({self.num_prompts}), got shape {w.shape}"
            )
        w = w[active]
        if not np.all(np.isfinite(w)) or np.any(w < 0):
            raise ValueError("sample(weights=): weights must be finite and >= 0")
        positive = int(np.count_nonzero(w))
        if positive < size:
            raise ValueError(
                f"sample(weights=): {size} prompts asked, only {positive} active prompts have weight > 0"
            )
        return rng.choice(active, size=size, replace=False, p=w / w.sum()).tolist()

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
