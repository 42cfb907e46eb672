"""The frame of an allocator that generates each step in one ask and trains every told group.

Uniform (GRPO), knapsack, CurES, DPS, the Beta selectors (MoPPS, SPO, BOTS) and the issue-29
allocators that decide a whole step up front (VCRL, Rollout-GDRO) share it: the per-step flag that ends
the step after one ask, the step's groups, the statistics row and the state of their
whole-pool numpy arrays. A subclass names its step's ask items (:meth:`OneAskStep._step_items`)
and appends its groups to ``self._groups`` in ``_tell``.
"""

from __future__ import annotations

import abc
from collections.abc import Sequence
from typing import Any, ClassVar

from rollcli.allocators._common import KeptGroups
from rollcli.allocators.api import Ask, AskItem, BaseAllocator, Group
from rollcli.allocators.state import array_from_json, array_to_json, group_from_json, group_to_json

__all__ = ["OneAskStep"]


class OneAskStep(KeptGroups, BaseAllocator):
    """One generation call a step; every group the subclass keeps in ``self._groups`` trains.

    Class attributes: ``state_arrays`` names the numpy attributes saved (bit-exact) in the
    state; ``stats_key`` is the key of ``self._last`` (the step's statistics for :meth:`stats`)
    in the state, kept per subclass so that checkpoints written before this base still load.
    """

    state_arrays: ClassVar[tuple[str, ...]] = ()
    stats_key: ClassVar[str] = "last"

    def __init__(self, config: Any, **kwargs: Any) -> None:
        super().__init__(config, **kwargs)
        self._asked = False
        self._groups: list[Group] = []
        self._last: dict[str, float] = {}

    @abc.abstractmethod
    def _step_items(self) -> Sequence[AskItem]:
        """The step's one ask (distinct prompts); empty when there is nothing to generate."""

    def _start_step(self) -> None:
        self._asked = False
        self._groups = []

    def _ask(self) -> Ask | None:
        if self._asked:
            return None
        self._asked = True
        items = self._step_items()
        return Ask(tuple(items)) if items else None

    def stats(self) -> dict[str, float]:
        return {**super().stats(), **self._last}

    def _state(self) -> dict[str, Any]:
        return {
            **{name: array_to_json(getattr(self, name)) for name in self.state_arrays},
            "asked": self._asked,
            "groups": [group_to_json(g) for g in self._groups],
            self.stats_key: dict(self._last),
        }

    def _load_state(self, state: dict[str, Any]) -> None:
        for name in self.state_arrays:
            setattr(self, name, array_from_json(state[name]))
        self._asked = bool(state["asked"])
        self._groups = [group_from_json(g) for g in state["groups"]]
        self._last = dict(state.get(self.stats_key, {}))  # uniform's older states have none
