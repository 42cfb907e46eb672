"""VCRL: train the prompts whose normalised group variance is high; replay them from a bank.

VCRL (Jiang et al., arXiv 2509.19803; no public code found). What could be read (the abstract
and third-party summaries, not the method section): with ``G`` binary rollouts of which ``k``
succeed, the unbiased group variance is ``sigma^2 = k (G - k) / (G (G - 1))``, largest at ``k =
G/2``: ``sigma^2_max = G / (4 (G - 1))`` for even ``G``, ``(G + 1) / (4 G)`` for odd ``G``; the
score ``p = sigma^2 / sigma^2_max`` in [0, 1] marks prompts of moderate difficulty, those are
trained, and a memory bank of high-``p`` prompts is replayed. rollcli's rule (its own choices
for what could not be read are in docs/allocators.md):

1. The step's ``B = rollouts_per_step // n`` slots: ``r`` prompts replayed from the bank (the
   highest scores; ``r`` = the slots dropped last step, at most the bank's size), the rest in
   epoch order; ``n`` rollouts each, one ask.
2. ``p`` of every group (for non-binary rewards: its unbiased variance over the largest a group
   of ``n`` rewards in [0, 1] can have).
3. ``p >= kappa``: the group trains and the prompt enters the bank with score ``p`` (a full
   bank drops its lowest score). ``p < kappa``: its rollouts are generated and not trained, and
   the prompt leaves the bank.

The step never generates more than ``B * n``; what it trains is at most that.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Literal

import numpy as np

from rollcli.allocators._common import check_at_least, check_fraction
from rollcli.allocators._one_ask import OneAskStep
from rollcli.allocators.api import AskItem, Group, Outcome
from rollcli.allocators.registry import register_allocator
from rollcli.allocators.state import prompt_dict_from_json, prompt_dict_to_json

__all__ = ["VcrlConfig", "VcrlAllocator", "normalised_variance", "max_variance"]


@dataclass(frozen=True)
class VcrlConfig:
    """VCRL; every default is rollcli's (the paper's group size, ``kappa`` and bank size could
    not be read)."""

    __pydantic_config__: ClassVar[dict[str, Any]] = {"extra": "forbid"}

    kind: Literal["vcrl"] = "vcrl"
    n: int = 16
    kappa: float = 0.5
    bank_size: int = 1024
    replay: bool = True

    def __post_init__(self) -> None:
        if self.n < 2:
            raise ValueError(f"n must be >= 2 (one rollout has no variance), got {self.n}")
        check_fraction(self, "kappa")
        check_at_least(self, 0, "bank_size")


def max_variance(g: int) -> float:
    """The largest unbiased variance of ``g`` rewards in [0, 1]: ``g / (4 (g - 1))`` for even
    ``g``, ``(g + 1) / (4 g)`` for odd ``g``."""
    return g / (4.0 * (g - 1)) if g % 2 == 0 else (g + 1) / (4.0 * g)


def normalised_variance(rewards: np.ndarray) -> np.ndarray:
    """``p = sigma^2 / sigma^2_max`` of each row of a ``(prompts, G)`` reward matrix."""
    r = np.asarray(rewards, dtype=np.float64)
    g = r.shape[1]
    return r.var(axis=1, ddof=1) / max_variance(g)


@register_allocator
class VcrlAllocator(OneAskStep):
    """Epoch-order prompts plus bank replays; groups with ``p >= kappa`` train."""

    config_class = VcrlConfig

    def __init__(self, config: VcrlConfig, **kwargs: Any) -> None:
        super().__init__(config, **kwargs)
        self.batch_prompts = self.prompts_per_step(config.n, f"n={config.n}")
        self.bank: dict[int, float] = {}  # prompt -> its last score p
        self._refill = 0
        self._last = {"kept": 0.0, "dropped": 0.0, "replayed": 0.0, "bank": 0.0, "score": 0.0}

    @property
    def max_step_rollouts(self) -> int:
        return self.batch_prompts * self.config.n

    def _step_items(self) -> list[AskItem]:
        replay = min(self._refill, len(self.bank)) if self.config.replay else 0
        # the bank's best scores; ties to the lower prompt id
        chosen = [p for p, _s in sorted(self.bank.items(), key=lambda kv: (-kv[1], kv[0]))[:replay]]
        picked, fresh = set(chosen), []
        # a prompt already in this step (a replay, or one read before the epoch boundary that
        # the next epoch's order hands out again) is skipped: no prompt is asked twice a step
        for _ in range(2 * self.source.num_prompts + 1):  # two epochs meet every active prompt
            need = self.batch_prompts - len(chosen) - len(fresh)
            if need <= 0:
                break
            taken = self.source.take(need)
            for p in taken:
                if p not in picked:
                    picked.add(p)
                    fresh.append(p)
            if len(taken) < need:
                break
        self._last["replayed"] = float(len(chosen))
        return AskItem.many(chosen + fresh, self.config.n)

    def _tell(self, outcomes: list[Outcome]) -> None:
        cfg = self.config
        if not outcomes:
            self._refill = 0
            return
        rewards = np.stack([np.clip(o.rewards, 0.0, 1.0) for o in outcomes])
        scores = normalised_variance(rewards)
        kept = 0
        for o, p in zip(outcomes, scores.tolist(), strict=True):
            if p >= cfg.kappa:
                kept += 1
                self._groups.append(Group(o.prompt_id, o.refs, o.rewards))
                self._bank_put(o.prompt_id, p)
            else:
                self.bank.pop(o.prompt_id, None)
        self._refill = len(outcomes) - kept
        self._last.update(kept=float(kept), dropped=float(self._refill),
                          bank=float(len(self.bank)), score=float(scores.mean()))  # fmt: skip

    def _bank_put(self, prompt: int, score: float) -> None:
        size = self.config.bank_size
        if size == 0:
            return
        self.bank[prompt] = score
        if len(self.bank) > size:
            worst = min(self.bank.items(), key=lambda kv: (kv[1], -kv[0]))[0]
            del self.bank[worst]

    def _state(self) -> dict[str, Any]:
        return {**super()._state(), "bank": prompt_dict_to_json(self.bank),
                "refill": self._refill}  # fmt: skip

    def _load_state(self, state: dict[str, Any]) -> None:
        super()._load_state(state)
        self.bank = prompt_dict_from_json(state["bank"], float)
        self._refill = int(state["refill"])
