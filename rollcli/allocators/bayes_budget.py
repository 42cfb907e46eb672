"""bayes_budget: the budget-aware oracle's rule with a decaying per-prompt posterior in place of p.

rollcli's own allocator (design, reasoning and measurements: docs/allocators/bayes_budget.md).
Every prompt of the pool has a ``Beta(a, b)`` posterior over its success probability that
carries across steps; at the start of every step the evidence of every prompt decays towards the
prior, ``a <- a0 + decay * (a - a0)`` (and ``b`` alike), so a prompt solved or failed long ago
becomes uncertain again and can come back. One step has at most two asks:

1. **Pilots where the posterior is uncertain.** Prompts whose evidence ``a + b - a0 - b0`` (the
   decayed number of rollouts the estimate rests on) is below ``min_evidence`` are candidates;
   up to ``pilot_share`` of the step's budget goes to ``n_pilot`` rollouts for each of those
   most likely to give a pilot with reward variance under the posterior predictive (ties by a
   random key). Their rewards update the posteriors at once.
2. **Commit by expected signal.** The rest of the budget is split over the active pool by the
   oracle's search (:func:`rollcli.allocators.oracle_signal.allocate_from_values`: group sizes
   ``0`` or ``n_min..n_max``, objective ``snr`` or ``signal``) on the *posterior-predictive*
   signal and noise of :mod:`rollcli.allocators.posterior_signal` -- the expectation over
   ``p ~ Beta(a, b)``, so an estimate resting on few rollouts is valued as the spread of
   outcomes it allows, not as its mean. Only the ``candidate_factor * budget / 8`` prompts most
   likely to give a group of 8 with reward variance enter the search (decision time).

Groups: a committed prompt trains on its pilot and commit rollouts together (one GRPO group,
as Pilot-Commit's); a piloted prompt without commit rollouts trains on its pilot if the pilot
has reward variance (``train_pilots = "informative"``), always (``"all"``) or never
(``"none"``). Rewards are successes in ``[0, 1]`` (clipped): a reward of 1 adds 1 to ``a``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Literal

import numpy as np

from rollcli.allocators._common import (
    KeptGroups,
    active_ids,
    check_at_least,
    check_choice,
    check_fraction,
    check_group_sizes,
    merge_outcomes,
)
from rollcli.allocators.api import Ask, AskItem, BaseAllocator, Group, Outcome
from rollcli.allocators.bayes_budget_spread import (
    baseline_values,
    rho_squared,
    spread_baseline_counts,
)
from rollcli.allocators.oracle_signal import allocate_from_values, size_menu
from rollcli.allocators.posterior_signal import PosteriorSignalTable, informative_probability
from rollcli.allocators.registry import register_allocator
from rollcli.allocators.state import (
    array_from_json,
    array_to_json,
    group_from_json,
    group_to_json,
    outcome_from_json,
    outcome_to_json,
)

__all__ = ["BayesBudgetConfig", "BayesBudgetAllocator"]

_PROBE = 8  # group size at which candidates are ranked before the search


@dataclass(frozen=True)
class BayesBudgetConfig:
    """bayes_budget's knobs (defaults: the design of docs/allocators/bayes_budget.md).

    ``n_min``, ``n_max``, ``objective`` and ``std_normalize`` mean what they mean for the
    budget-aware oracle. ``decay`` is the per-step weight kept by old evidence (1: none).
    """

    __pydantic_config__: ClassVar[dict[str, Any]] = {"extra": "forbid"}
    # added after specs were written: left out of dumped specs at their defaults (job ids)
    LATE_KNOBS: ClassVar[tuple[str, ...]] = (
        "decay_per",
        "advantage",
        "saturation_n",
        "saturation_carry",
        "explore_share",
        "trained_keep",
    )

    kind: Literal["bayes_budget"] = "bayes_budget"
    n_min: int = 2
    n_max: int = 128
    objective: Literal["snr", "signal"] = "snr"
    std_normalize: bool = True
    decay: float = 0.9
    decay_per: Literal["step", "epoch"] = "step"
    prior_alpha: float = 1.0
    prior_beta: float = 1.0
    n_pilot: int = 4
    pilot_share: float = 0.25
    min_evidence: float = 4.0
    train_pilots: Literal["informative", "all", "none"] = "informative"
    candidate_factor: float = 4.0
    advantage: Literal["group", "baseline"] = "group"
    saturation_n: float = 0.0
    saturation_carry: float = 0.0
    explore_share: float = 0.0
    trained_keep: float = 1.0

    def __post_init__(self) -> None:
        check_group_sizes(self.n_min, self.n_max)
        check_choice("objective", self.objective, ["snr", "signal"])
        check_choice("train_pilots", self.train_pilots, ["informative", "all", "none"])
        check_fraction(self, "decay")
        if not (self.prior_alpha > 0.0 and self.prior_beta > 0.0):
            raise ValueError(
                f"prior_alpha and prior_beta must be > 0, got {self.prior_alpha}, {self.prior_beta}"
            )
        check_at_least(self, 1, "n_pilot")
        if not 0.0 <= self.pilot_share < 1.0:
            raise ValueError(f"pilot_share must be in [0, 1), got {self.pilot_share}")
        check_at_least(self, 0, "min_evidence")
        check_at_least(self, 1, "candidate_factor")
        check_choice("advantage", self.advantage, ["group", "baseline"])
        check_choice("decay_per", self.decay_per, ["step", "epoch"])
        if not self.saturation_n >= 0.0:
            raise ValueError(
                f"saturation_n must be >= 0 (0: no saturation), got {self.saturation_n}"
            )
        check_fraction(self, "saturation_carry", "explore_share", "trained_keep")


@register_allocator
class BayesBudgetAllocator(KeptGroups, BaseAllocator):
    """Decaying Beta posteriors, pilots where uncertain, the budget by predictive signal."""

    config_class = BayesBudgetConfig
    presets = {
        "no-pilots": {"pilot_share": 0.0},  # history alone decides
        "signal": {"objective": "signal"},  # what an SGD step follows
        "dr-grpo": {"std_normalize": False},  # advantages without std division
        # the diversity-aware redesign: posterior-mean baseline, prompt values that saturate
        "diverse": {"advantage": "baseline", "saturation_n": 8.0, "pilot_share": 0.0},
        # its best tiny variant (found after the redesign's design; docs: variants): evidence
        # decays per pass over the pool and recent rollouts count against a prompt's saturation
        "diverse-carry": {
            "advantage": "baseline",
            "saturation_n": 8.0,
            "pilot_share": 0.0,
            "decay_per": "epoch",
            "saturation_carry": 1.0,
        },
        # issue 30's redesign (docs/LOG.md): half the pilots walk the epoch order, and a trained
        # prompt keeps half its evidence; on the sim suite it wins every scenario, hold-outs too
        "explore-keep": {"explore_share": 0.5, "trained_keep": 0.5},
    }

    def __init__(self, config: BayesBudgetConfig, **kwargs: Any) -> None:
        super().__init__(config, **kwargs)
        if self.rollouts_per_step < config.n_min:
            raise ValueError(
                f"bayes_budget: rollouts_per_step={self.rollouts_per_step} is below "
                f"n_min={config.n_min}"
            )
        self._table = PosteriorSignalTable(
            size_menu(config.n_min, config.n_max), config.std_normalize
        )
        num = self.source.num_prompts
        self.alpha = np.full(num, float(config.prior_alpha))
        self.beta = np.full(num, float(config.prior_beta))
        self._phase = "done"
        self._pilots: dict[int, Outcome] = {}
        self._groups: list[Group] = []
        self._spent = 0
        self._baselines: dict[int, float] = {}
        self._stats = {"pilots": 0.0, "groups": 0.0, "mean_group_size": 0.0, "evidence": 0.0}

    @property
    def max_step_rollouts(self) -> int:
        return self.rollouts_per_step

    # -- the step -------------------------------------------------------------------------
    def _start_step(self) -> None:
        cfg = self.config
        keep = cfg.decay
        if cfg.decay_per == "epoch":  # decay per pass over the pool: per step, budget / pool of it
            keep = cfg.decay ** min(1.0, self.rollouts_per_step / self.source.num_prompts)
        self._decay(keep)
        self._phase = "pilot" if cfg.pilot_share > 0 else "commit"
        self._pilots = {}
        self._groups = []
        self._spent = 0
        self._baselines = {}

    def _decay(self, keep: float, ids: np.ndarray | slice = slice(None)) -> None:
        """Move the evidence of ``ids`` (all prompts by default) towards the prior, keeping
        ``keep`` of it."""
        cfg = self.config
        self.alpha[ids] = cfg.prior_alpha + keep * (self.alpha[ids] - cfg.prior_alpha)
        self.beta[ids] = cfg.prior_beta + keep * (self.beta[ids] - cfg.prior_beta)

    def _active(self) -> np.ndarray:
        return active_ids(self.source)

    def _ask(self) -> Ask | None:
        if self._phase == "pilot":
            self._phase = "commit"
            ask = self._pilot_ask()
            if ask is not None:
                return ask
        if self._phase == "commit":
            self._phase = "done"
            return self._commit_ask()
        return None

    def _pilot_ask(self) -> Ask | None:
        cfg = self.config
        k = int(cfg.pilot_share * self.rollouts_per_step) // cfg.n_pilot
        if k == 0:
            return None
        # the exploration share walks the source's epoch order, so the pilots reach prompts the
        # posterior ranking would never pick (a mixed pilot outranks a never-seen prompt)
        explored = self.source.take(round(cfg.explore_share * k)) if cfg.explore_share else []
        ids = self._active()
        evidence = self.alpha[ids] + self.beta[ids] - cfg.prior_alpha - cfg.prior_beta
        uncertain = ids[evidence < cfg.min_evidence]
        if explored:
            uncertain = uncertain[~np.isin(uncertain, explored)]
        ranked = np.zeros(0, np.int64)
        if k > len(explored) and uncertain.size:
            value = informative_probability(
                self.alpha[uncertain], self.beta[uncertain], cfg.n_pilot
            )
            ranked = uncertain[_top(value, self.rng.random(uncertain.size), k - len(explored))]
        chosen = np.concatenate([np.asarray(explored, np.int64), ranked])
        if chosen.size == 0:
            return None
        self._note_baselines(chosen)
        return Ask(tuple(AskItem(int(p), cfg.n_pilot, "pilot") for p in chosen))

    def _note_baselines(self, ids: np.ndarray) -> None:
        """Keep each asked prompt's posterior mean before this step's rewards (its baseline)."""
        if self.config.advantage != "baseline":
            return
        mean = self.alpha[ids] / (self.alpha[ids] + self.beta[ids])
        fresh = dict(zip(ids.tolist(), mean.tolist(), strict=True))
        self._baselines = {**fresh, **self._baselines}  # the first ask of the step wins

    def _commit_ask(self) -> Ask | None:
        cfg = self.config
        budget = self.rollouts_per_step - self._spent
        ids = self._active()
        if ids.size == 0 or budget < (1 if cfg.advantage == "baseline" else cfg.n_min):
            return None
        if cfg.advantage == "baseline":
            return self._baseline_ask(ids, budget)
        keep = int(cfg.candidate_factor * self.rollouts_per_step / _PROBE)
        tie = self.rng.random(ids.size)
        if ids.size > keep:
            top = _top(informative_probability(self.alpha[ids], self.beta[ids], _PROBE), tie, keep)
            ids, tie = ids[top], tie[top]
        a, b = self.alpha[ids], self.beta[ids]
        signal, noise = self._table.lookup(a, b)
        if cfg.saturation_n > 0:  # prompt-specific noise (E[S]^2 standing in for E[S^2])
            noise = noise + rho_squared(cfg.saturation_n) * signal * signal
        sizes = self._table.sizes

        def evaluate(counts: np.ndarray) -> tuple[float, float, float]:
            s, v = _at_counts(signal, sizes, counts), _at_counts(noise, sizes, counts)
            total_s, total_v = float(s.sum()), float(v.sum())
            return (total_s / np.sqrt(total_v) if total_v > 0 else 0.0), total_s, total_v

        counts = allocate_from_values(signal, noise, sizes, budget, n_min=cfg.n_min,
                                      objective=cfg.objective, tie_key=tie,
                                      evaluate=evaluate)  # fmt: skip
        chosen = np.flatnonzero(counts)
        self._note_baselines(ids[chosen])
        return Ask(tuple(AskItem(int(ids[i]), int(counts[i]), "commit") for i in chosen))

    def _baseline_ask(self, ids: np.ndarray, budget: int) -> Ask | None:
        """Commit with posterior-baseline groups: the exact split of bayes_budget_spread."""
        cfg = self.config
        a, b = self.alpha[ids], self.beta[ids]
        s, v = baseline_values(a, b)
        # the decayed rollouts a prompt already has count against its saturation (a variant)
        carried = cfg.saturation_carry * (a + b - cfg.prior_alpha - cfg.prior_beta)
        counts = spread_baseline_counts(s, v, budget, n_max=cfg.n_max,
                                        rho2=rho_squared(cfg.saturation_n),
                                        tie_key=self.rng.random(ids.size),
                                        carried=np.maximum(carried, 0.0))  # fmt: skip
        chosen = np.flatnonzero(counts)
        self._note_baselines(ids[chosen])
        return Ask(tuple(AskItem(int(ids[i]), int(counts[i]), "commit") for i in chosen))

    def _tell(self, outcomes: list[Outcome]) -> None:
        self._spent += sum(o.num_rollouts for o in outcomes)
        ids = np.fromiter((o.prompt_id for o in outcomes), np.int64, len(outcomes))
        wins, sizes = _successes(outcomes)
        np.add.at(self.alpha, ids, wins)
        np.add.at(self.beta, ids, sizes - wins)
        if outcomes and outcomes[0].phase == "pilot":
            self._pilots = {o.prompt_id: o for o in outcomes}
            return
        committed = set()
        for o in outcomes:
            pilot = self._pilots.get(o.prompt_id)
            if pilot is None and self.config.advantage == "baseline":
                self._groups.append(Group(o.prompt_id, o.refs, o.rewards,
                                          baseline=self._baselines[o.prompt_id]))  # fmt: skip
            else:
                group = merge_outcomes(o.prompt_id, [pilot, o] if pilot else [o])
                self._groups.append(self._with_baseline(group))
            committed.add(o.prompt_id)
        self._finish(committed)

    def _finish(self, committed: set[int]) -> None:
        """Add the groups of piloted prompts that got no commit rollouts; fill the statistics."""
        rule = self.config.train_pilots
        left = [o for pid, o in self._pilots.items() if pid not in committed]
        if left and rule != "none":
            # every such rollout has an advantage in baseline mode; else it needs variance
            keep = rule == "all" or self.config.advantage == "baseline"
            varied = np.ones(len(left), bool) if keep else _varied(left)
            for o, on in zip(left, varied, strict=True):
                if on:
                    self._groups.append(self._with_baseline(Group(o.prompt_id, o.refs, o.rewards)))
        cfg = self.config
        if cfg.trained_keep < 1.0 and self._groups:
            # training moves a prompt's p most: its evidence decays by trained_keep at once, so
            # a committed prompt is not committed again on a stale, confident posterior
            self._decay(cfg.trained_keep, np.unique([g.prompt_id for g in self._groups]))
        sizes = [g.size for g in self._groups]
        ids = self._active()
        self._stats = {
            "pilots": float(len(self._pilots)),
            "groups": float(len(sizes)),
            "mean_group_size": float(np.mean(sizes)) if sizes else 0.0,
            "evidence": float(
                np.mean(self.alpha[ids] + self.beta[ids] - cfg.prior_alpha - cfg.prior_beta)
            )
            if ids.size
            else 0.0,
        }
        self._pilots = {}

    def _with_baseline(self, group: Group) -> Group:
        """The group as trained: GRPO's advantage, or ``r - m`` with its step-start mean."""
        if self.config.advantage != "baseline":
            return group
        return Group(group.prompt_id, group.refs, group.rewards,
                     baseline=self._baselines[group.prompt_id])  # fmt: skip

    def _train_groups(self) -> list[Group]:
        if self._pilots:  # the commit ask had nothing to spend: the pilots alone train
            self._finish(set())
        return super()._train_groups()

    def stats(self) -> dict[str, float]:
        return {**super().stats(), **self._stats}

    # -- state ----------------------------------------------------------------------------
    def _state(self) -> dict[str, Any]:
        return {
            "alpha": array_to_json(self.alpha),
            "beta": array_to_json(self.beta),
            "phase": self._phase,
            "spent": self._spent,
            "pilots": [outcome_to_json(o) for o in self._pilots.values()],
            "groups": [group_to_json(g) for g in self._groups],
            "baselines": {str(k): v for k, v in self._baselines.items()},
            "stats": dict(self._stats),
        }

    def _load_state(self, state: dict[str, Any]) -> None:
        self.alpha = array_from_json(state["alpha"])
        self.beta = array_from_json(state["beta"])
        self._phase = str(state["phase"])
        self._spent = int(state["spent"])
        pilots = [outcome_from_json(o) for o in state["pilots"]]
        self._pilots = {o.prompt_id: o for o in pilots}
        self._groups = [group_from_json(g) for g in state["groups"]]
        self._baselines = {int(k): float(v) for k, v in state.get("baselines", {}).items()}
        self._stats = {k: float(v) for k, v in state["stats"].items()}


def _top(value: np.ndarray, tie: np.ndarray, k: int) -> np.ndarray:
    """Positions of the ``k`` highest values, equal values by the lowest tie key, best first."""
    if k >= value.size:
        return np.lexsort((tie, -value))
    cut = np.partition(value, value.size - k)[value.size - k]  # the k-th highest value
    above = np.flatnonzero(value > cut)
    level = np.flatnonzero(value == cut)
    need = k - above.size
    if need < level.size:  # only the lowest tie keys of the level matter
        level = level[np.argpartition(tie[level], need - 1)[:need]]
    picked = np.concatenate([above, level])
    return picked[np.lexsort((tie[picked], -value[picked]))]


def _at_counts(values: np.ndarray, sizes: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Each row's value at its count, linear between menu sizes (0 for a count of 0)."""
    out = np.zeros(counts.size)
    on = np.flatnonzero(counts)
    if on.size == 0:
        return out
    c = counts[on]
    hi = np.clip(np.searchsorted(sizes, c), 0, sizes.size - 1)
    lo = np.maximum(hi - 1, 0)
    span = np.where(sizes[hi] > sizes[lo], sizes[hi] - sizes[lo], 1)
    w = np.where(sizes[hi] == c, 1.0, (c - sizes[lo]) / span)
    out[on] = (1 - w) * values[on, lo] + w * values[on, hi]
    return out


def _successes(outcomes: list[Outcome]) -> tuple[np.ndarray, np.ndarray]:
    """Summed rewards clipped to ``[0, 1]`` and rollout counts of each outcome (vectorised)."""
    sizes = np.fromiter((o.num_rollouts for o in outcomes), np.int64, len(outcomes))
    if not outcomes:
        return np.zeros(0), sizes.astype(float)
    flat = np.clip(np.concatenate([o.rewards for o in outcomes]).astype(float), 0.0, 1.0)
    starts = np.concatenate(([0], np.cumsum(sizes)[:-1]))
    wins = np.where(
        sizes > 0, np.add.reduceat(flat, np.minimum(starts, max(flat.size - 1, 0))), 0.0
    )
    return wins, sizes.astype(float)


def _varied(outcomes: list[Outcome]) -> np.ndarray:
    """Whether each outcome's rewards differ (reward variance > 0), without a loop in Python."""
    sizes = np.fromiter((o.num_rollouts for o in outcomes), np.int64, len(outcomes))
    flat = np.concatenate([o.rewards for o in outcomes]).astype(float)
    if flat.size == 0:
        return np.zeros(len(outcomes), bool)
    starts = np.minimum(np.concatenate(([0], np.cumsum(sizes)[:-1])), flat.size - 1)
    high, low = np.maximum.reduceat(flat, starts), np.minimum.reduceat(flat, starts)
    return (sizes > 1) & (high > low)
