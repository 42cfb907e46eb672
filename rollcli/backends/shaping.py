"""Success vs training reward: the shaping every backend applies before its advantages.

Each rollout carries two numbers. Its **success** (0/1, the verifiable outcome) is what a
backend puts in :class:`~rollcli.allocators.api.Outcome` ``rewards``: allocators, filters
(DAPO's dynamic sampling, GRESO, Pilot-Commit's gate), the ledger's zero-variance count and the
rollout breakdown read it, and the groups they return carry it. Its **training reward** is what
the advantage uses: the success plus optional shaping, computed by the backend from the success
and the response length of each trained rollout (:func:`training_rewards`), the same way on sim,
tiny and verl. So an all-wrong group whose responses differ in length stays zero-variance for
the allocator (nothing to learn from the outcome) while its shaped rewards differ — the trap of
filtering on a shaped score (REFERENCE.md §2c) cannot happen.

Shaping available (a backend knob pair; off by default):

* DAPO's **overlong buffer penalty** (Yu et al., 2025; verl's ``DAPORewardManager``): with
  ``L_max`` the backend's response limit and ``L_buf = overlong_buffer_len``, a response of
  ``|y|`` tokens gets ``min(0, -(|y| - (L_max - L_buf)) / L_buf * overlong_penalty_factor)``
  added: nothing up to ``L_max - L_buf``, then linearly down to ``-overlong_penalty_factor`` at
  ``L_max``.
* a **format score** (verl's ``format_score`` of its rule-based math scorers): a wrong response
  that still gives an answer in the expected form (a ``\\boxed{}`` for math, a fenced program
  for code) gets ``format_score`` (in [0, 1)) instead of 0; a right one keeps 1. Only the verl
  backend has text to check (``backend.format_score``; its reward function flags each response,
  :mod:`rollcli.backends.verl.rewards`). The sim backend has no text, and the tiny backend's answers
  are bare digit strings graded token by token (nothing to be well-formed about beyond the end
  token, which the success already requires), so neither has the knob.
* **partial credit for code** (``backend.code_partial_credit`` = w in [0, 1), verl with
  ``reward: code``): a failing solution gets w x the fraction of its tests that passed (all of
  them run, not stopping at the first failure); a passing one keeps 1, a timed-out one gets 0
  (the reward function reports a fraction of 0 for it). With ``format_score`` the two add up,
  so their sum must stay <= 1 for a failing solution to earn less than a passing one.

Pure numpy; the backends' configs hold the knobs and call :func:`check_shaping`.
"""

from __future__ import annotations

import math

import numpy as np

__all__ = [
    "SHAPING_KNOBS",
    "check_format_score",
    "check_partial_credit",
    "check_shaping",
    "format_bonus",
    "overlong_penalty",
    "partial_credit_bonus",
    "shaping_enabled",
    "training_rewards",
]

# the knobs every backend config has (defaults: no shaping), added after specs were written:
# each config lists them in its LATE_KNOBS, so dumps leave them out at their defaults (job ids)
SHAPING_KNOBS = ("overlong_buffer_len", "overlong_penalty_factor")


def check_shaping(
    backend: str, max_len: int, overlong_buffer_len: int, overlong_penalty_factor: float
) -> None:
    """Raise ``ValueError`` naming the knob when the shaping knobs are not usable."""
    if (
        not isinstance(overlong_buffer_len, int)
        or isinstance(overlong_buffer_len, bool)
        or not 0 <= overlong_buffer_len < max_len
    ):
        raise ValueError(
            f"{backend} backend: overlong_buffer_len must be an integer in [0, {max_len}) "
            f"(0: no penalty; below the response limit {max_len}), got {overlong_buffer_len!r}"
        )
    if not (math.isfinite(overlong_penalty_factor) and overlong_penalty_factor >= 0):
        raise ValueError(
            f"{backend} backend: overlong_penalty_factor must be a finite number >= 0, "
            f"got {overlong_penalty_factor!r}"
        )


def _is_share(value: object) -> bool:
    """A number (not a bool) in [0, 1)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and 0.0 <= value < 1.0


def check_format_score(backend: str, format_score: float) -> None:
    """Raise ``ValueError`` unless ``format_score`` lies in [0, 1) (a wrong but well-formed
    answer must earn less than a right one)."""
    if not _is_share(format_score):
        raise ValueError(
            f"{backend} backend: format_score must be a number in [0, 1) (0: off; what a wrong "
            f"but well-formed answer earns), got {format_score!r}"
        )


def check_partial_credit(backend: str, partial_credit: float, format_score: float = 0.0) -> None:
    """Raise ``ValueError`` unless ``partial_credit`` lies in [0, 1) and, with the format
    score, adds up to at most 1 (a failing solution must earn less than a passing one)."""
    if not _is_share(partial_credit):
        raise ValueError(
            f"{backend} backend: code_partial_credit must be a number in [0, 1) (0: off; what "
            f"a failing solution earns per unit of its fraction of tests passed), "
            f"got {partial_credit!r}"
        )
    if partial_credit + format_score > 1.0:
        raise ValueError(
            f"{backend} backend: code_partial_credit + format_score must be <= 1 (a failing "
            f"solution must earn less than a passing one), got {partial_credit!r} + "
            f"{format_score!r}"
        )


def partial_credit_bonus(
    success: np.ndarray, tests_passed: np.ndarray, partial_credit: float
) -> np.ndarray:
    """``partial_credit`` x the fraction of tests passed for each failed solution, else 0."""
    success = np.asarray(success, dtype=np.float64)
    fraction = np.clip(np.asarray(tests_passed, dtype=np.float64), 0.0, 1.0)
    if partial_credit <= 0:
        return np.zeros_like(success)
    return partial_credit * fraction * (success <= 0)


def format_bonus(success: np.ndarray, formatted: np.ndarray, format_score: float) -> np.ndarray:
    """``format_score`` for each failed response that is well-formed (``formatted`` 1), else 0."""
    success = np.asarray(success, dtype=np.float64)
    formatted = np.asarray(formatted, dtype=np.float64)
    if format_score <= 0:
        return np.zeros_like(success)
    return format_score * (formatted > 0) * (success <= 0)


def shaping_enabled(overlong_buffer_len: int, overlong_penalty_factor: float) -> bool:
    """Whether the knobs shape anything (otherwise the training reward is the success)."""
    return overlong_buffer_len > 0 and overlong_penalty_factor > 0


def overlong_penalty(
    num_tokens: np.ndarray, *, max_len: int, buffer_len: int, penalty_factor: float
) -> np.ndarray:
    """DAPO's overlong penalty per response (<= 0; zeros when ``buffer_len`` is 0)."""
    lengths = np.asarray(num_tokens, dtype=np.float64)
    if buffer_len <= 0 or penalty_factor <= 0:
        return np.zeros_like(lengths)
    exceed = lengths - (max_len - buffer_len)
    return np.minimum(-exceed / buffer_len * penalty_factor, 0.0)


def training_rewards(
    success: np.ndarray,
    num_tokens: np.ndarray,
    *,
    max_len: int,
    overlong_buffer_len: int = 0,
    overlong_penalty_factor: float = 1.0,
    format_score: float = 0.0,
    formatted: np.ndarray | None = None,
    partial_credit: float = 0.0,
    tests_passed: np.ndarray | None = None,
) -> np.ndarray:
    """The rewards the advantage uses: ``success`` plus the shaping (aligned arrays;
    ``formatted``: 1 where a response is well-formed, needed when ``format_score`` > 0;
    ``tests_passed``: each solution's fraction of tests passed, needed when ``partial_credit``
    > 0)."""
    success = np.asarray(success, dtype=np.float64)
    out = success
    if shaping_enabled(overlong_buffer_len, overlong_penalty_factor):
        out = out + overlong_penalty(
            num_tokens,
            max_len=max_len,
            buffer_len=overlong_buffer_len,
            penalty_factor=overlong_penalty_factor,
        )
    if format_score > 0:
        if formatted is None:
            raise ValueError("format_score > 0 needs each response's format flag")
        out = out + format_bonus(success, formatted, format_score)
    if partial_credit > 0:
        if tests_passed is None:
            raise ValueError("code_partial_credit > 0 needs each solution's fraction of tests")
        out = out + partial_credit_bonus(success, tests_passed, partial_credit)
    return out
