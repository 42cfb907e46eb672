"""bench_tiny's seed selection: ``--seed-list`` runs exactly the listed seeds (a hold-out on seeds
never looked at), ``--seeds N`` alone keeps 0..N-1, and a malformed list is refused."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _bench_tiny():
    spec = importlib.util.spec_from_file_location(
        "bench_tiny", ROOT / "benchmarks" / "bench_tiny.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_seed_list_ranges_and_singles():
    seed_list = _bench_tiny().seed_list
    assert seed_list(5, "") == [0, 1, 2, 3, 4]
    assert seed_list(5, "8-12") == [8, 9, 10, 11, 12]
    assert seed_list(5, "8, 3,20-21") == [8, 3, 20, 21]


@pytest.mark.parametrize(
    ("listed", "message"),
    [("8,x", "'x' is not a seed"), ("12-8", "is empty"), ("1,1", "distinct"), ("-1", "not a seed")],
)
def test_seed_list_refuses_malformed(listed, message):
    with pytest.raises(SystemExit, match=message):
        _bench_tiny().seed_list(5, listed)


def test_jobs_carry_the_listed_seeds():
    bench = _bench_tiny()
    jobs = bench._job_configs(
        ROOT / "experiments" / "zoo-tiny.yaml",
        bench.seed_list(5, "8-9"),
        None,
        only=["grpo", "bayes_budget_dc"],
        overrides=[],
        lr_grid=[],
        baseline="grpo",
    )
    assert sorted((j["job"]["id"], j["job"]["seed"]) for j in jobs) == [
        ("bayes_budget_dc", 8),
        ("bayes_budget_dc", 9),
        ("grpo", 8),
        ("grpo", 9),
    ]
    # a seed's job key differs from another seed's, so a hold-out never reuses a looked-at job
    keys = {bench._job_key(j) for j in jobs}
    assert len(keys) == 4


def test_base_seeds_cross_every_job_and_make_two_level_units():
    """``--base-seeds 0-2``: each (label, seed) runs on three base models, each its own job, and
    the bootstrap units become (base model, seed); without it a job keeps the spec's base model
    and its seed is its unit (so older cached jobs keep their keys)."""
    bench = _bench_tiny()
    args = dict(only=["grpo"], overrides=[], lr_grid=[], baseline="grpo")
    spec = ROOT / "experiments" / "zoo-tiny.yaml"
    one = bench._job_configs(spec, [0, 1], None, **args)
    assert all("base_seed" not in j["backend"] for j in one)
    three = bench._job_configs(spec, [0, 1], None, base_seeds=bench.seed_list(0, "0-2"), **args)
    assert sorted((j["backend"]["base_seed"], j["job"]["seed"]) for j in three) == [
        (b, s) for b in range(3) for s in range(2)
    ]
    assert bench._job_key(three[0]) == bench._job_key(one[0])  # base 0 is the default recipe's
    assert len({bench._job_key(j) for j in three}) == 6
    runs = [{"seed": s, "base_seed": b} for b in range(3) for s in range(2)]
    assert bench._unit(runs[3], runs) == (1, 1)
    assert bench._unit({"seed": 4, "base_seed": None}, [{"seed": 4, "base_seed": None}]) == 4
    with pytest.raises(SystemExit, match="--base-seeds 2-0"):
        bench.seed_list(0, "2-0", "--base-seeds")
