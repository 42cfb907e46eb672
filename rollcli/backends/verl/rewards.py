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

* ``code`` — the answer's last fenced program against the row's tests (``ground_truth``: the JSON
  of a code task, :mod:`rollcli.eval.benchmarks.code_tasks`) in rollcli's
  code sandbox, through a pool of warm sandboxed workers (:class:`SandboxPool`): 1.0 when every
  test passes.

Rewards are binary for math and code (1.0 correct, 0.0 otherwise): the allocators read them as
success. **Deadlines**: math is graded in a killable worker process
(:class:`~rollcli.eval.graders.pool.MathGradingPool`, one per process, shared by the reward loop's
threads) with a per-answer deadline of ``deadline_s`` (``reward_kwargs``, default 10 s); code
runs under the sandbox's per-test limit and a per-rollout deadline of ``deadline_s`` too. An
answer past its deadline scores 0 and is flagged: :func:`compute_score` returns ``{"score": s,
TIMEOUT_KEY: 0 or 1, FORMAT_KEY: 0 or 1}``, verl's reward loop carries the flag into the batch (``reward_extra_info``)
and the trainer counts it as ``reward/timeouts`` in the step's row. ``verl`` and custom
functions run in the calling thread with no deadline of rollcli's.

**Format flag**: ``FORMAT_KEY`` is 1.0 when the response is well-formed — math: it has a
``\\boxed{}`` answer (in the same last 4,000 characters that are graded); code: it has a fenced
program — else 0.0 (also past the grading deadline, and always for ``verl`` and custom
rewards). It travels beside the score
(``reward_extra_info``) and the trainer adds ``backend.format_score`` to the training reward of
a wrong, well-formed response (:func:`rollcli.backends.shaping.format_bonus`).

**Tests passed**: ``PASSED_KEY`` is a code solution's fraction of tests passed (0.0 past its
deadline, for a row that is not a test set, and for every other mode). With ``all_tests``
(``reward_kwargs``, set when ``backend.code_partial_credit`` > 0) every test runs; otherwise the
sandbox stops at the first failure and the fraction counts the tests up to it. The trainer adds
``code_partial_credit`` x the fraction to a failing solution's training reward
(:func:`rollcli.backends.shaping.partial_credit_bonus`); the score stays 0/1.
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import importlib
import logging
import os
import threading
from collections.abc import Callable, Sequence
from functools import lru_cache
from typing import Any

__all__ = [
    "DEFAULT_DEADLINE_S",
    "FORMAT_KEY",
    "PASSED_KEY",
    "TIMEOUT_KEY",
    "code_grades",
    "code_scores",
    "compute_score",
    "is_well_formed",
    "math_score",
    "math_scores",
    "toy_reward",
    "reward_function_config",
]

log = logging.getLogger(__name__)

_MAX_CHARS = 4000
DEFAULT_DEADLINE_S = 10.0
TIMEOUT_KEY = "rollcli_timeout"  # 1.0 where the grader hit its deadline (reward_extra_info)
FORMAT_KEY = "rollcli_formatted"  # 1.0 where the response has an answer in the expected form
PASSED_KEY = "rollcli_tests_passed"  # a code solution's fraction of tests passed

# one grading pool of each kind per process (verl's reward workers call from many threads)
_LOCK = threading.Lock()
_POOLS: dict[str, Any] = {}
_POOL_PID: int | None = None


def _pool(kind: str, deadline_s: float, size: int = 1) -> Any:
    """This process's math or code pool (rebuilt after a fork or for another deadline or size;
    ``size``: sandbox workers of the code pool, :func:`rollcli.backends.verl.overrides.
    sandbox_workers_per_process`)."""
    global _POOL_PID
    if os.getpid() != _POOL_PID:
        _POOLS.clear()  # a forked child must not share its parent's workers
        _POOL_PID = os.getpid()
    pool = _POOLS.get(kind)
    if pool is not None and (pool.rollcli_deadline_s, pool.rollcli_size) != (deadline_s, size):
        pool.close()
        pool = None
    if pool is None:
        if kind == "math":
            from rollcli.eval.graders.pool import MathGradingPool

            pool = MathGradingPool(1, deadline_s=deadline_s)
        else:
            from rollcli.eval.graders.sandbox import SandboxPool

            pool = SandboxPool(size, rollout_timeout_s=deadline_s)
        pool.rollcli_deadline_s = deadline_s
        pool.rollcli_size = size
        _POOLS[kind] = pool
    return pool


def _close_pools() -> None:
    """At exit, before the interpreter tears modules down (a pool's ``__del__`` then fails)."""
    if os.getpid() == _POOL_PID:
        for pool in list(_POOLS.values()):
            with contextlib.suppress(Exception):
                pool.close()
    _POOLS.clear()


atexit.register(_close_pools)


def math_scores(
    pairs: Sequence[tuple[str, str]], deadline_s: float = DEFAULT_DEADLINE_S
) -> list[tuple[float, bool]]:
    """``(score, timed_out)`` per ``(response, ground_truth)``: 1.0 when the last boxed answer
    equals the gold, graded in a killable worker; an answer past ``deadline_s`` scores 0.0."""
    work = [(str(gold), str(response)[-_MAX_CHARS:]) for response, gold in pairs]
    try:
        with _LOCK:
            results = _pool("math", deadline_s).grade(work)
    except Exception:  # a broken pool scores the batch wrong, it must not kill training
        log.exception("math grading failed")
        return [(0.0, False)] * len(work)
    return [(0.0, True) if r.method == "timeout" else (float(r.correct), False) for r in results]


def math_score(response: str, ground_truth: str, deadline_s: float = DEFAULT_DEADLINE_S) -> float:
    """1.0 when the last boxed answer of ``response`` equals ``ground_truth``, else 0.0 (also
    past the deadline)."""
    return math_scores([(response, ground_truth)], deadline_s)[0][0]


def code_grades(
    pairs: Sequence[tuple[str, Any]],
    deadline_s: float = DEFAULT_DEADLINE_S,
    all_tests: bool = False,
    workers: int = 1,
) -> list[tuple[float, bool, float]]:
    """``(score, timed_out, fraction of tests passed)`` per ``(response, tests)``: 1.0 when every
    test passes in the sandbox; a test past its limit or a solution past ``deadline_s`` scores
    0.0, flagged, with a fraction of 0. ``all_tests`` runs every test (else the run stops at the
    first failure). ``workers``: this process's sandbox pool size."""
    from rollcli.eval.benchmarks.code_tasks import task_problem
    from rollcli.eval.graders.code import grade_code_batch

    items, bad = [], []
    for index, (response, ground_truth) in enumerate(pairs):
        try:
            items.append((task_problem(ground_truth), str(response)))
        except (KeyError, TypeError, ValueError) as error:  # scored wrong: training goes on
            log.error("code reward: row %d's ground truth is not a test set (%s)", index, error)
            bad.append(index)
    with _LOCK:
        pool = _pool("code", deadline_s, max(1, int(workers)))
    # the pool itself is thread-safe
    results = iter(grade_code_batch(items, pool, stop_at_first_failure=not all_tests))
    out = []
    for index in range(len(pairs)):
        if index in bad:
            out.append((0.0, False, 0.0))
            continue
        result = next(results)
        timed_out = result.status == "timeout"
        fraction = 0.0 if timed_out else result.fraction_passed
        out.append((1.0 if result.correct else 0.0, timed_out, fraction))
    return out


def code_scores(
    pairs: Sequence[tuple[str, Any]], deadline_s: float = DEFAULT_DEADLINE_S
) -> list[tuple[float, bool]]:
    """``(score, timed_out)`` per ``(response, tests)`` (:func:`code_grades` without the
    fraction)."""
    return [(score, timed_out) for score, timed_out, _ in code_grades(pairs, deadline_s)]


def is_well_formed(response: str, mode: str) -> bool:
    """Whether ``response`` gives an answer in the form ``mode`` grades: a ``\\boxed{}`` in its
    last 4,000 characters (``math``) or a fenced program (``code``); False for other modes."""
    if mode == "math":
        from rollcli.eval.benchmarks.math_sets import last_boxed

        return last_boxed(str(response)[-_MAX_CHARS:]) is not None
    if mode == "code":
        from rollcli.eval.graders.code import extract_code

        return extract_code(str(response)) is not None
    return False


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
    deadline_s: float = DEFAULT_DEADLINE_S,
    all_tests: bool = False,
    sandbox_workers: int = 1,
    **_: Any,
) -> dict[str, float]:
    """verl's custom-reward signature; ``mode``, ``deadline_s``, ``all_tests`` and
    ``sandbox_workers`` (this reward process's sandbox pool) arrive through ``reward_kwargs``. Returns ``{"score": s, TIMEOUT_KEY: 0.0 or 1.0, FORMAT_KEY: 0.0
    or 1.0, PASSED_KEY: fraction}`` (the same keys for every row: verl's agent loop stacks them
    into the batch)."""
    fraction = 0.0
    if mode == "math":
        score, timed_out = math_scores([(solution_str, ground_truth)], float(deadline_s))[0]
    elif mode == "code":
        pair = [(solution_str, ground_truth)]
        score, timed_out, fraction = code_grades(
            pair, float(deadline_s), bool(all_tests), int(sandbox_workers)
        )[0]
    else:
        score = _other_score(data_source, solution_str, ground_truth, extra_info, mode)
        return {"score": score, TIMEOUT_KEY: 0.0, FORMAT_KEY: 0.0, PASSED_KEY: 0.0}
    # an answer past its deadline was never judged: no format score for it either
    formatted = float(not timed_out and is_well_formed(solution_str, mode))
    return {
        "score": score,
        TIMEOUT_KEY: float(timed_out),
        FORMAT_KEY: formatted,
        PASSED_KEY: fraction,
    }


def _other_score(
    data_source: str, solution_str: str, ground_truth: str, extra_info: Any, mode: str
) -> float:
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


def reward_function_config(
    mode: str, deadline_s: float = DEFAULT_DEADLINE_S, all_tests: bool = False
) -> dict[str, Any]:
    """The verl overrides that route every reward through :func:`compute_score` (the deadline
    only when it is not the default and ``all_tests`` only when set, so existing specs compile
    to the same overrides)."""
    out = {
        "reward.custom_reward_function.path": "pkg://rollcli.backends.verl.rewards",
        "reward.custom_reward_function.name": "compute_score",
        "+reward.custom_reward_function.reward_kwargs.mode": mode,
    }
    if float(deadline_s) != DEFAULT_DEADLINE_S:
        out["+reward.custom_reward_function.reward_kwargs.deadline_s"] = float(deadline_s)
    if all_tests:
        out["+reward.custom_reward_function.reward_kwargs.all_tests"] = True
    return out
