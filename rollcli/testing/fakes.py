"""A small honest fake backend: fixed per-prompt Bernoulli success, int refs, no learning.

:class:`FakeBackend` implements :class:`rollcli.backends.api.BaseBackend` exactly as a real
backend must, so allocator and train-loop tests can run against it:

* ``generate`` draws each rollout's reward from Bernoulli(``p[prompt]``) with its own RNG, hands
  out consecutive int refs (a counter in its state) and counts ``tokens_correct`` or
  ``tokens_wrong`` tokens per rollout;
* ``update`` does not learn (``p`` never changes); it checks that every group references only
  stored rollouts whose rewards match what was generated, records the groups and bumps
  ``policy_version``;
* ``retain`` frees every stored rollout not named, so a group that later uses a freed ref fails;
* ``generated`` keeps a log of every outcome (prompt, phase, rollouts, tokens) for ledger checks.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from rollcli.allocators.api import Ask, BaseAllocator, Group, Outcome
from rollcli.backends.api import BaseBackend

__all__ = ["FakeBackend", "FakeBackendError", "ScriptedBackend", "drive_step"]


class FakeBackendError(AssertionError):
    """A caller broke the backend protocol (unknown or freed ref, reward mismatch)."""


class FakeBackend(BaseBackend):
    """Fixed success probabilities ``p`` (one per prompt); see the module docstring."""

    kind = "fake"

    def __init__(
        self,
        p: np.ndarray,
        seed: int,
        *,
        tokens_correct: int = 100,
        tokens_wrong: int = 200,
    ) -> None:
        self.p = np.asarray(p, dtype=float).copy()
        if self.p.ndim != 1 or len(self.p) == 0:
            raise ValueError("p must be a non-empty 1-D array of success probabilities")
        if np.any((self.p < 0) | (self.p > 1)):
            raise ValueError("every p must lie in [0, 1]")
        if tokens_correct < 0 or tokens_wrong < 0:
            raise ValueError("token counts must be non-negative")
        self.seed = seed
        self.tokens_correct = int(tokens_correct)
        self.tokens_wrong = int(tokens_wrong)
        self.rng = np.random.default_rng([seed, 0xFA4E])
        self._version = 0
        self._next_ref = 0
        self._store: dict[int, float] = {}  # ref -> reward
        self.generated: list[tuple[int, str, int, int]] = []  # (prompt, phase, rollouts, tokens)
        self.updates: list[list[Group]] = []

    # -- BaseBackend ------------------------------------------------------------------------
    @property
    def num_prompts(self) -> int:
        return len(self.p)

    @property
    def policy_version(self) -> int:
        return self._version

    @property
    def num_generated(self) -> int:
        """Rollouts generated so far."""
        return sum(n for _, _, n, _ in self.generated)

    @property
    def num_generated_tokens(self) -> int:
        return sum(t for _, _, _, t in self.generated)

    @property
    def num_stored(self) -> int:
        return len(self._store)

    def generate(self, ask: Ask) -> list[Outcome]:
        outcomes = []
        for item in ask.items:
            if not 0 <= item.prompt_id < len(self.p):
                raise FakeBackendError(
                    f"prompt {item.prompt_id} is not in the pool of {len(self.p)}"
                )
            n = item.num_rollouts
            rewards = self._draw(item.prompt_id, n)
            tokens = np.where(rewards > 0, self.tokens_correct, self.tokens_wrong).astype(np.int64)
            refs = tuple(range(self._next_ref, self._next_ref + n))
            self._next_ref += n
            for ref, reward in zip(refs, rewards, strict=True):
                self._store[ref] = float(reward)
            self.generated.append((item.prompt_id, item.phase, n, int(tokens.sum())))
            outcomes.append(
                Outcome(item.prompt_id, item.phase, rewards, tokens, self._version, refs)
            )
        return outcomes

    def _draw(self, prompt_id: int, n: int) -> np.ndarray:
        return (self.rng.random(n) < self.p[prompt_id]).astype(float)

    def update(self, groups: list[Group]) -> dict[str, float]:
        for group in groups:
            if len(group.rewards) != len(group.refs):
                raise FakeBackendError(f"group of prompt {group.prompt_id}: rewards/refs differ")
            for ref, reward in zip(group.refs, group.rewards, strict=True):
                if ref not in self._store:
                    raise FakeBackendError(
                        f"group of prompt {group.prompt_id} uses ref {ref}, unknown or freed"
                    )
                if self._store[ref] != float(reward):
                    raise FakeBackendError(
                        f"group of prompt {group.prompt_id}: ref {ref} has reward "
                        f"{self._store[ref]}, the group says {reward}"
                    )
        self.updates.append(list(groups))
        self._version += 1
        sizes = [g.size for g in groups]
        return {"groups": float(len(groups)), "rollouts": float(sum(sizes))}

    def evaluate(self) -> dict[str, float]:
        return {"accuracy": float(self.p.mean())}

    def retain(self, refs: Iterable[Any]) -> None:
        keep = set(refs)
        self._store = {r: w for r, w in self._store.items() if r in keep}

    def success_probabilities(self, prompt_ids: np.ndarray) -> np.ndarray:
        return self.p[np.asarray(prompt_ids, dtype=int)].copy()

    def state_dict(self) -> dict[str, Any]:
        return {
            "p": self.p.tolist(),
            "seed": self.seed,
            "rng": self.rng.bit_generator.state,
            "version": self._version,
            "next_ref": self._next_ref,
            "store": [[r, w] for r, w in sorted(self._store.items())],
            "generated": [list(g) for g in self.generated],
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.p = np.asarray(state["p"], dtype=float)
        self.seed = int(state["seed"])
        self.rng.bit_generator.state = state["rng"]
        self._version = int(state["version"])
        self._next_ref = int(state["next_ref"])
        self._store = {int(r): float(w) for r, w in state["store"]}
        self.generated = [(int(a), str(b), int(c), int(d)) for a, b, c, d in state["generated"]]


class ScriptedBackend(FakeBackend):
    """A fake whose rewards are scripted: the j-th rollout ever made of prompt i gets
    ``patterns[i][j % len(patterns[i])]``, for exact hand-computed tests. ``p`` is the pattern mean."""

    kind = "scripted"

    def __init__(self, patterns: list[list[float]], seed: int = 0, **tokens: int) -> None:
        if not patterns or any(len(pat) == 0 for pat in patterns):
            raise ValueError("every prompt needs a non-empty reward pattern")
        super().__init__(np.array([float(np.mean(pat)) for pat in patterns]), seed, **tokens)
        self.patterns = [[float(r) for r in pat] for pat in patterns]
        self.drawn = [0] * len(patterns)

    def _draw(self, prompt_id: int, n: int) -> np.ndarray:
        pat, start = self.patterns[prompt_id], self.drawn[prompt_id]
        self.drawn[prompt_id] += n
        return np.array([pat[(start + j) % len(pat)] for j in range(n)], dtype=float)

    def state_dict(self) -> dict[str, Any]:
        return {**super().state_dict(), "drawn": list(self.drawn)}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        super().load_state_dict(state)
        self.drawn = [int(d) for d in state["drawn"]]


def drive_step(
    allocator: BaseAllocator, backend: FakeBackend, step: int, *, max_asks: int = 10_000
) -> list[Group]:
    """Run one training step of ``allocator`` against ``backend`` as the train loop does."""
    allocator.start_step(step)
    for _ in range(max_asks):
        ask = allocator.ask()
        if ask is None:
            break
        allocator.tell(backend.generate(ask))
    else:
        raise AssertionError(f"step {step} asked more than {max_asks} times")
    groups = allocator.train_groups()
    backend.update(groups)
    backend.retain(allocator.live_refs())
    return groups
