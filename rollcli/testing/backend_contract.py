"""The contract suite every backend passes (sim, tiny; verl where it can run).

Subclass :class:`BackendContract` in a test module and implement :meth:`make_backend`; pytest
collects the inherited ``test_*`` methods::

    class TestSimBackendContract(BackendContract):
        def make_backend(self, seed: int) -> BaseBackend:
            return create_sim_backend({"kind": "sim", "num_train_prompts": 64}, seed=seed)

It checks what the train loop and every allocator rely on: outcomes aligned with the ask (prompt,
phase, rollout count, rewards, token counts, unique int refs, the generating policy version);
``policy_version`` counting updates; updates on groups of unequal size and of size one;
``retain`` freeing every other rollout; a state round-trip (through pickle, as a checkpoint)
continuing bit-exactly; same seed, same rollouts; ``evaluate`` reporting ``accuracy``.
"""

from __future__ import annotations

import pickle
from typing import Any

import numpy as np

from rollcli.allocators.api import Ask, AskItem, Group, Outcome
from rollcli.backends.api import BaseBackend

__all__ = ["BackendContract", "outcome_fingerprint"]


def outcome_fingerprint(outcomes: list[Outcome]) -> list[tuple[Any, ...]]:
    """Everything a backend returned, as comparable plain values."""
    return [
        (
            o.prompt_id,
            o.phase,
            o.rewards.tolist(),
            np.asarray(o.num_tokens).tolist(),
            o.policy_version,
            tuple(o.refs),
        )
        for o in outcomes
    ]


def _groups(outcomes: list[Outcome], sizes: list[int] | None = None) -> list[Group]:
    groups = []
    for i, o in enumerate(outcomes):
        n = o.num_rollouts if sizes is None else min(sizes[i], o.num_rollouts)
        groups.append(Group(o.prompt_id, tuple(o.refs[:n]), np.asarray(o.rewards[:n])))
    return groups


class BackendContract:
    """Inherited by a ``Test*`` class that implements :meth:`make_backend`."""

    #: rollouts per ask item in the checks; keep small for expensive backends
    num_rollouts: int = 4

    def make_backend(self, seed: int) -> BaseBackend:
        raise NotImplementedError("implement make_backend(seed) in the test class")

    # -- helpers --------------------------------------------------------------------------------
    def _ask(self, backend: BaseBackend, offset: int = 0) -> Ask:
        n = backend.num_prompts
        ids = [(offset + k) % n for k in range(3)]
        k = self.num_rollouts
        return Ask(
            (
                AskItem(ids[0], k, "pilot"),
                AskItem(ids[1], k + 1, "commit"),
                AskItem(ids[2], 1, "main"),
            )
        )

    def _step(self, backend: BaseBackend, offset: int) -> list[Outcome]:
        outcomes = backend.generate(self._ask(backend, offset))
        backend.update(_groups(outcomes))
        return outcomes

    # -- the contract ---------------------------------------------------------------------------
    def test_generate_returns_aligned_outcomes(self) -> None:
        backend = self.make_backend(0)
        try:
            assert backend.num_prompts >= 1
            ask = self._ask(backend)
            first = backend.generate(ask)
            second = backend.generate(ask)
            assert len(first) == len(ask.items)
            seen: set[int] = set()
            assert len(second) == len(ask.items)
            pairs = [*zip(ask.items, first, strict=True), *zip(ask.items, second, strict=True)]
            for item, outcome in pairs:
                assert outcome.prompt_id == item.prompt_id
                assert outcome.phase == item.phase
                assert outcome.num_rollouts == item.num_rollouts
                assert len(outcome.rewards) == len(outcome.num_tokens) == item.num_rollouts
                assert np.all(np.isfinite(outcome.rewards))
                assert np.all(np.asarray(outcome.num_tokens) >= 1)
                assert outcome.policy_version == backend.policy_version
            for outcome in first + second:
                for ref in outcome.refs:
                    assert isinstance(ref, int) and not isinstance(ref, bool)
                    assert ref not in seen, f"ref {ref} handed out twice"
                    seen.add(ref)
        finally:
            backend.close()

    def test_policy_version_counts_updates(self) -> None:
        backend = self.make_backend(0)
        try:
            assert backend.policy_version == 0
            self._step(backend, 0)
            assert backend.policy_version == 1
            outcomes = self._step(backend, 3)
            assert backend.policy_version == 2
            assert all(o.policy_version == 1 for o in outcomes)
        finally:
            backend.close()

    def test_update_on_unequal_and_singleton_groups(self) -> None:
        backend = self.make_backend(0)
        try:
            outcomes = backend.generate(self._ask(backend))
            metrics = backend.update(_groups(outcomes, [self.num_rollouts, 2, 1]))
            assert isinstance(metrics, dict)
            for key, value in metrics.items():
                assert isinstance(key, str)
                assert np.isfinite(float(value)), f"update metric {key} = {value}"
            assert backend.policy_version == 1
        finally:
            backend.close()

    def test_retain_frees_other_refs(self) -> None:
        import pytest

        backend = self.make_backend(0)
        try:
            outcomes = backend.generate(self._ask(backend))
            kept, dropped = outcomes[0], outcomes[1]
            backend.retain(set(kept.refs))
            backend.update(_groups([kept]))  # retained refs still train
            with pytest.raises((LookupError, ValueError, AssertionError)):
                backend.update(_groups([dropped]))
        finally:
            backend.close()

    def test_state_round_trip_continues_bit_exactly(self) -> None:
        original = self.make_backend(7)
        restored = self.make_backend(7)
        try:
            self._step(original, 0)
            held = original.generate(self._ask(original, 5))
            original.retain(set(held[0].refs))  # a retained rollout crosses the checkpoint
            state = pickle.loads(pickle.dumps(original.state_dict()))

            def continuation(backend: BaseBackend) -> tuple[Any, ...]:
                fresh = backend.generate(self._ask(backend, 11))
                metrics = backend.update(_groups([held[0], *fresh]))
                later = backend.generate(self._ask(backend, 2))
                return (
                    outcome_fingerprint(fresh),
                    sorted(metrics.items()),
                    outcome_fingerprint(later),
                    backend.policy_version,
                    sorted(backend.evaluate().items()),
                )

            expected = continuation(original)
            restored.load_state_dict(state)
            assert continuation(restored) == expected
        finally:
            original.close()
            restored.close()

    def test_same_seed_same_rollouts(self) -> None:
        a, b = self.make_backend(3), self.make_backend(3)
        try:
            for backend in (a, b):
                self._step(backend, 1)
            assert outcome_fingerprint(a.generate(self._ask(a, 4))) == outcome_fingerprint(
                b.generate(self._ask(b, 4))
            )
        finally:
            a.close()
            b.close()

    def test_evaluate_reports_accuracy(self) -> None:
        backend = self.make_backend(0)
        try:
            result = backend.evaluate()
            assert "accuracy" in result
            assert 0.0 <= float(result["accuracy"]) <= 1.0
            for key, value in result.items():
                assert np.isfinite(float(value)), f"evaluate()[{key!r}] = {value}"
        finally:
            backend.close()
