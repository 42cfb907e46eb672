"""The reward function verl calls for every rollout: rollcli's math grader, verl's, or a custom one.

verl's reward loop workers call :func:`compute_score` (configured as
``reward.custom_reward_function: {path: pkg://rollcli.backends.verl.rewards, name: compute_score,
reward_kwargs: {mode: ...}}``). ``mode`` is the backend's ``reward`` knob:

* ``math`` — :func:`rollcli.eval.graders.math.grade_math_verify` (the last ``\\boxed{}``,
  math-verify with the string fallback); math-verify's own timeouts are off there, so the answer
  is first cut to its last 4,000 characters, which bounds sympy's work on long garbage;
* ``verl`` — ``verl.utils.reward_score.default_compute_score`` for the row's ``data_source``,
  falling back to ``math`` where verl has no scorer for it;
* ``package.module:function`` — ``function(response, ground_truth) -> float`` (tests use
  :func:`toy_reward`).

Rewards are binary for math (1.0 correct, 0.0 otherwise): the allocators read them as success.
"""

from __future__ import annotations

import hashlib
import importlib
from collections.abc import Callable
from functools import lru_cache
from typing import Any

__all__ = ["compute_score", "math_score", "toy_reward", "reward_function_config"]

_MAX_CHARS = 4000


def math_score(response: str, ground_truth: str) -> float:
    """1.0 when the last boxed answer of ``response`` equals ``ground_truth``, else 0.0."""
    text = response[-_MAX_CHARS:]
    try:
        from rollcli.eval.graders.math import grade_math_verify
    except ImportError:  # pragma: no cover - the eval package is part of rollcli
        from math_verify import parse, verify

        gold = parse(f"\\boxed{{{ground_truth}}}", parsing_timeout=None)
        pred = parse(text, parsing_timeout=None)
        return float(bool(gold and pred and verify(gold, pred, timeout_seconds=None)))
    try:
        return float(grade_math_verify(str(ground_truth), text).correct)
    except Exception:  # a grader crash on one answer scores it wrong, it must not kill training
        return 0.0


def toy_reward(response: str, ground_truth: str) -> float:
    """A deterministic coin per (response, answer): p = 1/2 for a random policy (CPU tests only).

    A random tiny model never solves MATH, so every group would have zero variance and
    Pilot-Commit would keep nothing; this reward gives the allocators real variance to act on.
    """
    digest = hashlib.sha256(f"{ground_truth}\x00{response}".encode()).digest()
    return float(digest[0] & 1)


@lru_cache(maxsize=8)
def _custom(path: str) -> Callable[[str, str], float]:
    module_name, _, attr = path.partition(":")
    return getattr(importlib.import_module(module_name), attr)


def compute_score(
    data_source: str,
    solution_str: str,
    ground_truth: str,
    extra_info: dict[str, Any] | None = None,
    mode: str = "math",
    **_: Any,
) -> float:
    """verl's custom-reward signature; ``mode`` arrives through ``reward_kwargs``."""
    if mode == "math":
        return math_score(solution_str, ground_truth)
    if mode == "verl":
        from verl.utils.reward_score import default_compute_score

        try:
            result = default_compute_score(data_source, solution_str, ground_truth, extra_info)
        except NotImplementedError:
            return math_score(solution_str, ground_truth)
        # allocators read rewards as success (1) / failure (0); some verl scorers return -1 for a
        # wrong answer (math_dapo's score) and carry the success flag as ``acc``
        if isinstance(result, dict):
            if "acc" in result:
                return float(bool(result["acc"]))
            result = result["score"]
        return max(0.0, float(result))
    return float(_custom(mode)(solution_str, ground_truth))


def reward_function_config(mode: str) -> dict[str, Any]:
    """The verl overrides that route every reward through :func:`compute_score`."""
    return {
        "reward.custom_reward_function.path": "pkg://rollcli.backends.verl.rewards",
        "reward.custom_reward_function.name": "compute_score",
        "+reward.custom_reward_function.reward_kwargs.mode": mode,
    }
