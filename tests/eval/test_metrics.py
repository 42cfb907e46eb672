"""avg@k, the unbiased pass@k estimator and macro-averaging."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rollcli.eval.metrics import avg_at_k, benchmark_scores, macro_average, pass_at_k


def test_pass_at_k_known_values():
    assert pass_at_k(10, 0, 1) == 0.0
    assert pass_at_k(10, 10, 5) == 1.0
    assert pass_at_k(10, 3, 1) == pytest.approx(0.3)
    assert pass_at_k(4, 1, 2) == pytest.approx(1 - math.comb(3, 2) / math.comb(4, 2))
    with pytest.raises(ValueError):
        pass_at_k(4, 1, 5)


@given(
    st.integers(1, 40).flatmap(
        lambda n: st.tuples(st.just(n), st.integers(0, n), st.integers(1, n))
    )
)
def test_pass_at_k_matches_combinatorics(args):
    n, c, k = args
    expected = 1 - math.comb(n - c, k) / math.comb(n, k)
    assert pass_at_k(n, c, k) == pytest.approx(expected, abs=1e-9)


def test_benchmark_scores_and_macro():
    per_problem = {"a": [True, False, False, False], "b": [True, True, True, True]}
    scores = benchmark_scores(per_problem, ks=(1, 4))
    assert scores["avg@4"] == pytest.approx(0.625) == scores["accuracy"]
    assert scores["pass@1"] == pytest.approx(0.625)
    assert scores["pass@4"] == 1.0
    assert avg_at_k({"x": [False]}) == 0.0
    assert macro_average({"s1": {"accuracy": 0.2}, "s2": {"accuracy": 0.6}}, "accuracy") == 0.4
