"""Where every generated rollout went: the ledger's split of rollouts and tokens by what they bought.

Every rollout an allocator generates ends in exactly one of four parts:

* **informative**: trained in a group whose advantages are not all zero (rewards not all equal;
  for a group with a ``baseline``, some reward differs from it);
* **zero_var**: trained in a group whose advantages are all zero (a zero-variance group, or a
  group of one without a baseline): generated, trained, and taught nothing;
* **decision**: generated and never trained: discarded pilots and screens, rejected groups
  (DAPO, GRESO), rollouts left out of a kept subset (PODS, Reinforce-Ada), buffered pilots that
  aged out (Pilot-Commit);
* **held**: generated, not trained yet and still live (``BaseAllocator.live_refs``: a buffer or a
  bound commit), so it may train in a later step. A level, not a flow: at the end of a run it is
  what the buffers still hold.

``informative + zero_var + decision + held == generated``, for rollouts and for tokens, at the end
of every step (the row contract checks it). Apart from these, **skipped** counts the rollouts a
history-based allocator did *not* generate because its history predicted them useless (GRESO's
skipped prompts times ``n``): never generated, so not part of the sum, and without tokens.

:class:`RolloutBreakdown` is fed by :class:`rollcli.allocators.api.BudgetLedger`: ``told`` with
each ask's outcomes, ``trained`` with the step's groups and the live refs. Groups that reuse an
outcome's ``refs`` tuple as it was told (uniform, DAPO, GRESO, ...) are matched without a per-rollout
lookup; others (Pilot-Commit's merged groups, PODS's subsets) go through a ref -> tokens map.
Pure Python + numpy.
"""

from __future__ import annotations

from collections.abc import Collection, Hashable, Mapping, Sequence
from typing import Any

import numpy as np

__all__ = ["PARTS", "RolloutBreakdown", "informative_mask"]

#: The parts generated rollouts (and tokens) split into, in display order.
PARTS = ("informative", "zero_var", "decision", "held")


def informative_mask(groups: Sequence[Any]) -> np.ndarray:
    """Per group: do its advantages carry signal (rewards not all equal, or not all the baseline)?"""
    if not groups:
        return np.zeros(0, dtype=bool)
    sizes = np.array([len(g.refs) for g in groups], dtype=np.int64)
    nonempty = sizes > 0
    out = np.zeros(len(groups), dtype=bool)
    if not nonempty.any():
        return out
    kept = [g for g, ok in zip(groups, nonempty.tolist(), strict=True) if ok]
    ksizes = sizes[nonempty]
    starts = np.zeros_like(ksizes)
    np.cumsum(ksizes[:-1], out=starts[1:])
    rewards = np.concatenate([np.asarray(g.rewards, dtype=float) for g in kept])
    varied = np.maximum.reduceat(rewards, starts) > np.minimum.reduceat(rewards, starts)
    baselines = [g.baseline for g in kept]
    if any(b is not None for b in baselines):
        for i, (g, b) in enumerate(zip(kept, baselines, strict=True)):
            if b is not None:  # A = r - baseline: signal wherever a reward differs from it
                varied[i] = bool(np.any(np.asarray(g.rewards, dtype=float) != b))
    out[nonempty] = varied
    return out


class RolloutBreakdown:
    """Cumulative and per-step counts of the four parts (and skipped), in rollouts and tokens.

    ``told`` outcomes wait until the step's ``trained``; then each rollout is informative,
    zero_var, held (live) or decision. Held rollouts keep their token count so that a later step
    that trains them, or lets them go, moves the right tokens.
    """

    _COUNTERS = (
        *(f"{part}_{unit}" for part in PARTS[:3] for unit in ("rollouts", "tokens")),
        "skipped_rollouts",
        "informative_groups",
    )

    def __init__(self) -> None:
        self.total = dict.fromkeys(self._COUNTERS, 0)
        self.step = dict.fromkeys(self._COUNTERS, 0)
        # this step's told outcomes: refs tuples, per-rollout tokens, token sums (one per ask)
        self._told_refs: list[tuple[Hashable, ...]] = []
        self._told_tokens: list[np.ndarray] = []
        self._told_sums: list[np.ndarray] = []
        self._told_varied: list[np.ndarray] = []
        # generated, not trained, still live: ref -> tokens
        self.held: dict[Hashable, int] = {}

    # -- feeding ----------------------------------------------------------------------------
    def start_step(self) -> None:
        self.step = dict.fromkeys(self._COUNTERS, 0)

    def told(
        self,
        refs: Sequence[tuple[Hashable, ...]],
        tokens: Sequence[np.ndarray],
        sums: np.ndarray,
        varied: np.ndarray,
    ) -> None:
        """Outcomes of one ask (non-empty ones): their refs, per-rollout token counts, each
        outcome's token sum and whether its rewards are not all equal."""
        self._told_refs += refs
        self._told_tokens += tokens
        self._told_sums.append(np.asarray(sums, dtype=np.int64))
        self._told_varied.append(np.asarray(varied, dtype=bool))

    def skipped(self, rollouts: int) -> None:
        """Rollouts not generated because the allocator's history predicted them useless."""
        if rollouts < 0:
            raise ValueError(f"skipped rollouts must be >= 0, got {rollouts}")
        self._add("skipped_rollouts", int(rollouts))

    def trained(self, groups: Sequence[Any], live: Collection[Hashable]) -> None:
        """Split the step's outcomes (and the held rollouts) by the trained ``groups`` and ``live``."""
        refs, tokens = self._told_refs, self._told_tokens
        sums = np.concatenate(self._told_sums) if self._told_sums else np.zeros(0, np.int64)
        varied = np.concatenate(self._told_varied) if self._told_varied else np.zeros(0, bool)
        self._told_refs, self._told_tokens, self._told_sums, self._told_varied = [], [], [], []
        group_refs = [g.refs for g in groups]
        if group_refs == refs:  # every told outcome trains as told, in order (uniform, ...)
            k = np.arange(len(refs))
            fast = True
        else:
            index = {id(r): k for k, r in enumerate(refs)}
            k = np.array([index.get(id(r), -1) for r in group_refs], dtype=np.int64)
            fast = bool((k >= 0).all()) and np.unique(k).size == k.size
        baselines = [g.baseline for g in groups]
        if fast and baselines.count(None) == len(baselines):
            signal = varied[k]  # the told outcome's rewards: the group's own
        else:
            signal = informative_mask(groups)
        self._add("informative_groups", int(signal.sum()))
        if fast:
            # every group is a told outcome as it was told: counts by array, no per-rollout work
            sizes = np.fromiter(map(len, refs), np.int64, len(refs))[k]
            for part, mask in (("informative", signal), ("zero_var", ~signal)):
                self._add(f"{part}_rollouts", int(sizes[mask].sum()))
                self._add(f"{part}_tokens", int(sums[k[mask]].sum()))
            unused = np.ones(len(refs), dtype=bool)
            unused[k] = False
            left = np.flatnonzero(unused).tolist()
            self._settle([refs[i] for i in left], [tokens[i] for i in left], sums[unused], live)
            return
        tokens_of: dict[Hashable, int] = dict(self.held)
        self.held = {}
        for r, t in zip(refs, tokens, strict=True):
            tokens_of.update(zip(r, t.tolist(), strict=True))
        # [rollouts, tokens] of the zero_var (0) and informative (1) groups, added once at the end
        parts = [[0, 0], [0, 0]]
        pop = tokens_of.pop
        for g, inf in zip(groups, signal.tolist(), strict=True):
            # a ref the ledger never saw (a checkpoint from before the breakdown) counts 0 tokens
            count = parts[bool(inf)]
            count[0] += len(g.refs)
            count[1] += sum([pop(r, 0) for r in g.refs])
        for part, (rollouts, tokens_sum) in zip(("zero_var", "informative"), parts, strict=True):
            self._add(f"{part}_rollouts", rollouts)
            self._add(f"{part}_tokens", tokens_sum)
        self._release(tokens_of, live)

    def _settle(
        self,
        refs: list[tuple[Hashable, ...]],
        tokens: list[np.ndarray],
        sums: np.ndarray,
        live: Collection[Hashable],
    ) -> None:
        """Untrained told outcomes and the held rollouts become held (live) or decision."""
        if not live:
            self._add("decision_rollouts", sum(map(len, refs)) + len(self.held))
            self._add("decision_tokens", int(sums.sum()) + sum(self.held.values()))
            self.held = {}
            return
        tokens_of: dict[Hashable, int] = dict(self.held)
        self.held = {}
        for r, t in zip(refs, tokens, strict=True):
            tokens_of.update(zip(r, t.tolist(), strict=True))
        self._release(tokens_of, live)

    def _release(self, tokens_of: Mapping[Hashable, int], live: Collection[Hashable]) -> None:
        gone_rollouts = gone_tokens = 0
        for ref, tokens in tokens_of.items():
            if ref in live:
                self.held[ref] = tokens
            else:
                gone_rollouts += 1
                gone_tokens += tokens
        self._add("decision_rollouts", gone_rollouts)
        self._add("decision_tokens", gone_tokens)

    def _add(self, key: str, value: int) -> None:
        self.total[key] += value
        self.step[key] += value

    # -- reading ----------------------------------------------------------------------------
    @property
    def held_rollouts(self) -> int:
        return len(self.held)

    @property
    def held_tokens(self) -> int:
        return int(sum(self.held.values()))

    # -- state ------------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """JSON-safe: refs as given (ints for every backend), the pending outcomes as lists."""
        return {
            "total": dict(self.total),
            "step": dict(self.step),
            "held": [[_ref_json(r), int(t)] for r, t in self.held.items()],
            "told": [
                [[_ref_json(r) for r in refs], tokens.tolist(), bool(v)]
                for refs, tokens, v in zip(
                    self._told_refs,
                    self._told_tokens,
                    np.concatenate(self._told_varied).tolist() if self._told_varied else [],
                    strict=True,
                )
            ],
        }

    def load_state_dict(self, state: Mapping[str, Any] | None) -> None:
        """Restore :meth:`state_dict`; a checkpoint without one (older) restarts every count at 0."""
        state = state or {}
        self.total = {k: int((state.get("total") or {}).get(k, 0)) for k in self._COUNTERS}
        self.step = {k: int((state.get("step") or {}).get(k, 0)) for k in self._COUNTERS}
        self.held = {_ref_key(r): int(t) for r, t in state.get("held") or []}
        told = state.get("told") or []
        self._told_refs = [tuple(_ref_key(r) for r in refs) for refs, _, _ in told]
        self._told_tokens = [np.asarray(tokens, dtype=np.int64) for _, tokens, _ in told]
        self._told_sums = [np.array([int(t.sum()) for t in self._told_tokens], dtype=np.int64)]
        self._told_varied = [np.array([bool(v) for _, _, v in told], dtype=bool)]


def _ref_json(ref: Hashable) -> Any:
    return list(ref) if isinstance(ref, tuple) else ref


def _ref_key(ref: Any) -> Hashable:
    """A ref back from JSON: lists (tuples before the round trip) become tuples again."""
    return tuple(_ref_key(r) for r in ref) if isinstance(ref, list) else ref
