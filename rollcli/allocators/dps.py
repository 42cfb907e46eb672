"""DPS: a 3-state hidden Markov model of each prompt's solve state, filtered online, picks the
batch from a candidate pool.

DPS (arXiv 2603.10887; code maoyixiu/DPS, ``recipe/dps/task_sampler.py`` and
``recipe/dps/our_ray_trainer.py``, commit 5654d52), the MoPPS group's successor. A prompt's
state is 1 (never solved: success rate 0), 2 (partly solved) or 3 (always solved: rate 1).
Each prompt keeps Dirichlet counts ``alpha`` of a 3 x 3 transition matrix (column ``j``: from
state ``j``) and a predicted state distribution ``pi``. Each step:

1. **Candidates.** The next ``int(candidate_factor * B)`` prompts of the epoch order (a short
   tail dropped), ``B = rollouts_per_step // n``.
2. **Selection** (``topk``): the ``B`` candidates with the highest ``pi[state 2]`` (numpy's
   ``argsort`` of the negated scores, as the official); ``topk+entropy`` adds
   ``entropy_weight`` times the entropy of ``pi``; ``uniform`` draws ``B`` at random.
3. Each selected prompt gets ``n`` rollouts and trains as one GRPO group.
4. **Filtering**, for every prompt that was ever a candidate. A selected prompt observes its
   state ``o`` from its success rate (a reward >= 1 is a success) and, with ``P = alpha``
   normalised per column, ``pi_prev`` the state distribution it was last filtered to::

       alpha <- decay * alpha + (1 - decay) * prior + outer(e_o, pi_prev) * P / sum(...)
       pi_prev <- e_o;   pi <- normalise(P(alpha) @ e_o)

   Every other known prompt propagates without evidence: ``alpha <- decay * alpha + (1 -
   decay) * prior``, ``pi_prev <- pi``, ``pi <- normalise(P(alpha) @ pi)``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Literal

import numpy as np

from rollcli.allocators._common import check_at_least, check_choice, check_fraction, take_full_batch
from rollcli.allocators._one_ask import OneAskStep
from rollcli.allocators.api import AskItem, Group, Outcome
from rollcli.allocators.registry import register_allocator

__all__ = ["DpsConfig", "DpsAllocator", "dps_prior_alpha", "dps_prior_pi", "dps_filter"]

# the official named transition priors (rows: next state, columns: current state)
_PRIOR_ALPHA = {
    "progress": [[1.0, 0.5, 0.5], [1.0, 1.0, 0.5], [1.0, 1.0, 1.0]],
    "stability": [[1.0, 0.5, 0.5], [0.5, 1.0, 0.5], [0.5, 0.5, 1.0]],
    "local": [[1.0, 1.0, 0.0], [1.0, 1.0, 1.0], [0.0, 1.0, 1.0]],
}
_PRIOR_PI = {
    "uniform": [1 / 3, 1 / 3, 1 / 3],
    "1": [1.0, 0.0, 0.0],
    "2": [0.0, 1.0, 0.0],
    "3": [0.0, 0.0, 1.0],
}


@dataclass(frozen=True)
class DpsConfig:
    """DPS; defaults are the published math setting (``math_verl_{1.5b,7b}_dps.sh``)."""

    __pydantic_config__: ClassVar[dict[str, Any]] = {"extra": "forbid"}

    kind: Literal["dps"] = "dps"
    n: int = 8
    candidate_factor: float = 32.0
    decay: float = 0.7
    prior_alpha: float | Literal["progress", "stability", "local"] = 1.0
    prior_pi: Literal["uniform", "1", "2", "3"] = "uniform"
    strategy: Literal["topk", "topk+entropy", "uniform"] = "topk"
    entropy_weight: float = 0.0
    update: bool = True

    def __post_init__(self) -> None:
        check_at_least(self, 1, "n")
        if not self.candidate_factor >= 1.0:
            raise ValueError(
                f"candidate_factor must be >= 1 (the batch is chosen from the candidates), "
                f"got {self.candidate_factor}"
            )
        check_fraction(self, "decay")
        if isinstance(self.prior_alpha, str):
            check_choice("prior_alpha", self.prior_alpha, [1.0, *_PRIOR_ALPHA])
        elif not self.prior_alpha > 0.0:
            raise ValueError(f"prior_alpha must be > 0 or a named prior, got {self.prior_alpha}")
        check_choice("prior_pi", self.prior_pi, list(_PRIOR_PI))
        check_choice("strategy", self.strategy, ["topk", "topk+entropy", "uniform"])


def dps_prior_alpha(prior: float | str) -> np.ndarray:
    """The 3 x 3 Dirichlet prior of the transition counts (a number: every entry)."""
    if isinstance(prior, str):
        return np.array(_PRIOR_ALPHA[prior])
    return np.full((3, 3), float(prior))


def dps_prior_pi(prior: str) -> np.ndarray:
    return np.array(_PRIOR_PI[prior])


def _expected(alpha: np.ndarray) -> np.ndarray:
    """Each (n, 3, 3) count matrix normalised per column: ``P[i, j] = P(next i | now j)``."""
    # the column sums added in the order numpy's axis-0 sum of one matrix adds them (same bits)
    total = alpha[:, 0, :] + alpha[:, 1, :]
    total += alpha[:, 2, :]
    return alpha / total[:, None, :]


def _propagate(alpha: np.ndarray, pi: np.ndarray) -> np.ndarray:
    # matmul rounds as the official per-prompt np.dot does (einsum does not): the top-k then
    # breaks exact ties among equal predictions in the same order
    nxt = np.matmul(_expected(alpha), pi[:, :, None])[:, :, 0]
    for _ in range(2):  # the official normalises twice (the last bits differ)
        total = nxt[:, 0] + nxt[:, 1]
        total += nxt[:, 2]
        nxt /= total[:, None]
    return nxt


def dps_filter(
    alpha: np.ndarray,
    pi: np.ndarray,
    pi_prev: np.ndarray,
    observed: np.ndarray | None,
    *,
    prior: np.ndarray,
    decay: float,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One filtering step of prompts with counts ``alpha`` (n, 3, 3), prediction ``pi`` and
    last filtered distribution ``pi_prev`` (n, 3): with ``observed`` states (n,) the official
    ``train`` update of a selected prompt, with ``None`` that of a known prompt not selected.
    Returns the new ``(alpha, pi, pi_prev)`` (without evidence, ``pi_prev`` is ``pi`` itself)."""
    if decay == 1.0:
        kept = alpha  # alpha * 1 + prior * 0 is alpha, bit for bit
    else:
        kept = alpha * decay
        kept += prior * (1 - decay)
    if observed is None:
        return kept, _propagate(kept, pi), pi
    seen = np.zeros_like(pi)
    seen[np.arange(len(observed)), observed] = 1.0
    joint = np.einsum("ni,nj->nij", seen, pi_prev) * _expected(alpha)
    new_alpha = kept + joint / joint.sum(axis=(1, 2), keepdims=True)
    return new_alpha, _propagate(new_alpha, seen), seen


@register_allocator
class DpsAllocator(OneAskStep):
    """HMM-filtered solve states; the B candidates most likely partly solved train."""

    config_class = DpsConfig
    state_arrays = ("alpha", "pi", "pi_prev", "known")
    presets = {
        # DeepSeek-R1-Distill-Qwen-1.5B / 7B on MATH (recipe/dps/scripts/math/*_dps.sh)
        "paper-math": {"n": 8, "candidate_factor": 32.0, "decay": 0.7, "strategy": "topk"},
        # Qwen2.5-3B / 7B on Countdown and Geometry3k (scripts/{countdown,geo3k}/*_dps.sh)
        "paper-countdown": {"n": 8, "candidate_factor": 8.0, "decay": 0.5, "strategy": "topk"},
        "paper-geometry": {"n": 8, "candidate_factor": 8.0, "decay": 0.5, "strategy": "topk"},
    }

    def __init__(self, config: DpsConfig, **kwargs: Any) -> None:
        super().__init__(config, **kwargs)
        self.batch_prompts = self.prompts_per_step(config.n, f"n={config.n}")
        self.num_candidates = int(config.candidate_factor * self.batch_prompts)
        self.prior = dps_prior_alpha(config.prior_alpha)
        num = self.source.num_prompts
        pi0 = dps_prior_pi(config.prior_pi)
        self.alpha = np.broadcast_to(self.prior, (num, 3, 3)).copy()
        self.pi = np.broadcast_to(pi0, (num, 3)).copy()
        self.pi_prev = self.pi.copy()
        self.known = np.zeros(num, dtype=bool)  # ever a candidate (the official's dict keys)
        self._last = {"candidates": 0.0, "state2_prob": 0.0, "known": 0.0}

    @property
    def max_step_rollouts(self) -> int:
        return self.batch_prompts * self.config.n

    def _step_items(self) -> list[AskItem]:
        cfg = self.config
        pool = np.asarray(take_full_batch(self.source, self.num_candidates), dtype=np.int64)
        if pool.size == 0:
            return []
        self.known[pool] = True
        k = min(self.batch_prompts, pool.size)
        if cfg.strategy == "uniform":
            picked = self.rng.choice(pool.size, size=k, replace=False)
        else:
            pi = self.pi[pool]
            score = pi[:, 1]
            if cfg.strategy == "topk+entropy":
                score = score + cfg.entropy_weight * -np.sum(pi * np.log(pi + 1e-10), axis=1)
            picked = np.argsort(-score)[:k]  # the official call: numpy's default sort kind
        chosen = pool[picked]
        self._last = {
            "candidates": float(pool.size),
            "state2_prob": float(self.pi[chosen, 1].mean()),
            "known": float(self.known.sum()),
        }
        return AskItem.many(chosen.tolist(), cfg.n)

    def _tell(self, outcomes: list[Outcome]) -> None:
        self._groups += [Group(o.prompt_id, o.refs, o.rewards) for o in outcomes]
        if not self.config.update or not outcomes:
            return
        ids = np.fromiter((o.prompt_id for o in outcomes), np.int64, len(outcomes))
        n = self.config.n  # every asked prompt got n rollouts
        wins = np.count_nonzero(
            np.concatenate([o.rewards for o in outcomes]).reshape(len(outcomes), n) >= 1.0, axis=1
        )
        observed = np.where(wins == 0, 0, np.where(wins == n, 2, 1))
        decay, prior = self.config.decay, self.prior
        seen = dps_filter(self.alpha[ids], self.pi[ids], self.pi_prev[ids], observed,
                          prior=prior, decay=decay)  # fmt: skip
        # every other known prompt propagates; the selected ones are overwritten below
        if self.known.all():  # the whole pool: no gather and scatter
            self.alpha, self.pi, self.pi_prev = dps_filter(
                self.alpha, self.pi, self.pi_prev, None, prior=prior, decay=decay
            )
        else:
            rest = np.flatnonzero(self.known)
            self.alpha[rest], self.pi[rest], self.pi_prev[rest] = dps_filter(
                self.alpha[rest], self.pi[rest], self.pi_prev[rest], None,
                prior=prior, decay=decay,
            )  # fmt: skip
        self.alpha[ids], self.pi[ids], self.pi_prev[ids] = seen
