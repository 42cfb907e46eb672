"""Accuracy metrics: avg@k (mean pass@1 over k samples), unbiased pass@k, macro-average.

``pass_at_k(n, c, k)`` is the unbiased estimator of Chen et al. (2021), ``1 - C(n-c, k)/C(n, k)``,
computed as a stable product. ``avg@k`` is what AIME-style reports call accuracy: the mean over
problems of the fraction of a problem's k samples that are correct. Scores are in [0, 1].
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

__all__ = ["pass_at_k", "avg_at_k", "benchmark_scores", "macro_average"]


def pass_at_k(num_samples: int, num_correct: int, k: int) -> float:
    """Probability that at least one of k samples drawn without replacement is correct."""
    if not 0 <= num_correct <= num_samples:
        raise ValueError(f"need 0 <= num_correct <= num_samples, got {num_correct}/{num_samples}")
    if not 1 <= k <= num_samples:
        raise ValueError(f"need 1 <= k <= num_samples ({num_samples}), got k={k}")
    if num_samples - num_correct < k:
        return 1.0
    prob_all_wrong = 1.0
    for i in range(num_samples - num_correct + 1, num_samples + 1):
        prob_all_wrong *= 1.0 - k / i
    return 1.0 - prob_all_wrong


def avg_at_k(per_problem: Mapping[str, Sequence[bool]]) -> float:
    """Mean over problems of the per-problem fraction correct (avg@k, mean pass@1)."""
    if not per_problem:
        raise ValueError("avg@k of an empty benchmark")
    return sum(sum(v) / len(v) for v in per_problem.values()) / len(per_problem)


def benchmark_scores(
    per_problem: Mapping[str, Sequence[bool]], ks: Iterable[int] = (1,)
) -> dict[str, float]:
    """``{"accuracy": .., "avg@k": .., "pass@1": .., "pass@k": ..}`` for one benchmark.

    ``accuracy`` is avg@k under a name that does not depend on k, so benchmarks sampled with
    different k can be macro-averaged.

    k for ``avg@k`` is the smallest sample count over problems; ``pass@j`` is reported for
    each requested j that every problem has enough samples for.
    """
    if not per_problem:
        raise ValueError("scores of an empty benchmark")
    n_min = min(len(v) for v in per_problem.values())
    accuracy = avg_at_k(per_problem)
    scores = {"accuracy": accuracy, f"avg@{n_min}": accuracy}
    for k in sorted(set(ks) | {1}):
        if k <= n_min:
            scores[f"pass@{k}"] = sum(
                pass_at_k(len(v), sum(v), k) for v in per_problem.values()
            ) / len(per_problem)
    return scores


def macro_average(per_benchmark: Mapping[str, Mapping[str, float]], key: str) -> float:
    """Unweighted mean of ``key`` over benchmarks (each benchmark counts once)."""
    values = [scores[key] for scores in per_benchmark.values() if key in scores]
    if not values:
        raise ValueError(f"no benchmark reports {key!r}")
    return sum(values) / len(values)
