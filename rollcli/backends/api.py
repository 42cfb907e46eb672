"""The backend protocol: what generates rollouts and learns from groups (sim, tiny, verl).

The generic step loop (``rollcli.train``) drives a backend through these calls only. A backend
owns its rollouts: :meth:`BaseBackend.generate` returns :class:`~rollcli.allocators.Outcome`
objects whose ``refs`` point into the backend's own rollout store; :meth:`update` receives
groups of those refs; :meth:`retain` tells it which refs the allocator may still use, so all
others can be freed. ``state_dict`` is taken at step boundaries and must include the retained
rollouts, so a resumed run continues bit-exactly.
"""

from __future__ import annotations

import abc
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from rollcli.allocators.api import Ask, Group, Outcome

__all__ = ["BaseBackend"]


class BaseBackend(abc.ABC):
    """A policy with a finite training pool of prompts and a held-out evaluation set."""

    kind: str

    @property
    @abc.abstractmethod
    def num_prompts(self) -> int:
        """Size of the training pool; prompt ids are ``0 .. num_prompts - 1``."""

    @property
    @abc.abstractmethod
    def policy_version(self) -> int:
        """Number of updates applied so far."""

    @abc.abstractmethod
    def generate(self, ask: Ask) -> list[Outcome]:
        """Generate the ask's rollouts with the current policy: one outcome per item, in order."""

    @abc.abstractmethod
    def update(self, groups: list[Group]) -> dict[str, float]:
        """One policy update (GRPO) on the groups; returns metrics (loss, grad norm, ...)."""

    @abc.abstractmethod
    def evaluate(self) -> dict[str, float]:
        """Held-out evaluation. Must include ``accuracy`` (the headline number); may add more keys
        (``level1``, ``greedy``, ``mean@k``, per-benchmark accuracies)."""

    def start_step(self, step: int) -> None:  # noqa: B027 - optional hook
        """Step ``step`` (1-based) begins: called by the step routine before its first ask."""

    def retain(self, refs: Iterable[Any]) -> None:  # noqa: B027 - optional hook
        """Free every stored rollout whose ref is not in ``refs``."""

    def success_probabilities(self, prompt_ids: np.ndarray) -> np.ndarray:
        """True success probabilities (sim only; the oracle allocator uses them)."""
        raise NotImplementedError(
            f"the {self.kind} backend does not know true success probabilities"
        )

    @abc.abstractmethod
    def state_dict(self) -> dict[str, Any]:
        """Everything needed to resume bit-exactly (weights, optimiser, RNG, retained rollouts)."""

    @abc.abstractmethod
    def load_state_dict(self, state: Mapping[str, Any]) -> None: ...

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release processes or memory."""
