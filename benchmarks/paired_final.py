"""Paired final accuracy: allocator A minus each other allocator, seed by seed (exploratory).

Reads a folder of finished train jobs (a run folder's ``jobs/`` or bench_tiny's ``--out``
``jobs/``): each job's ``config.yaml`` (allocator, seed) and the last ``eval/accuracy`` of its
``metrics.jsonl``. Prints the mean difference over the seeds both ran, a 95 % percentile
interval from 2,000 bootstrap resamples of those seeds (numpy seed 0), and on how many seeds A
is ahead. Not a pre-registered metric: rollcli report's speedups to target are; docs/zoo.md says
where a number comes from this script.

    python benchmarks/paired_final.py /tmp/zoo-field-sim/zoo-sim-e96ddc/jobs xrpo uniform hora vip
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import yaml


def final_accuracies(jobs: Path) -> dict[str, dict[int, float]]:
    """``{allocator: {seed: last eval/accuracy}}`` of the finished train jobs in ``jobs``."""
    out: dict[str, dict[int, float]] = {}
    for folder in sorted(p for p in jobs.iterdir() if (p / "config.yaml").is_file()):
        job = yaml.safe_load((folder / "config.yaml").read_text())["job"]
        metrics = folder / "metrics.jsonl"
        if job.get("type") != "train" or not metrics.is_file():
            continue
        rows = [json.loads(line) for line in metrics.read_text().splitlines() if line.strip()]
        evals = [r["eval/accuracy"] for r in rows if "eval/accuracy" in r]
        if evals:
            out.setdefault(job["allocator"], {})[int(job["seed"])] = float(evals[-1])
    return out


def paired_difference(a: dict[int, float], b: dict[int, float], resamples: int = 2000):
    """Mean of ``a - b`` over shared seeds, its 95 % bootstrap interval, seeds ahead, seeds."""
    seeds = sorted(set(a) & set(b))
    if not seeds:
        raise SystemExit("no seed ran under both allocators")
    diff = np.array([a[s] - b[s] for s in seeds])
    draws = np.random.default_rng(0).integers(0, len(diff), size=(resamples, len(diff)))
    means = diff[draws].mean(axis=1)
    low, high = np.percentile(means, [2.5, 97.5])
    return float(diff.mean()), float(low), float(high), int((diff > 0).sum()), len(diff)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("jobs", type=Path, help="a folder of train-job folders")
    parser.add_argument("allocator", help="A, the allocator compared")
    parser.add_argument("others", nargs="+", help="the allocators A is compared with")
    args = parser.parse_args()
    acc = final_accuracies(args.jobs)
    for name in [args.allocator, *args.others]:
        if name not in acc:
            raise SystemExit(f"{args.jobs}: no finished train job of allocator {name!r}")
    for other in args.others:
        mean, low, high, ahead, n = paired_difference(acc[args.allocator], acc[other])
        print(
            f"{args.allocator} - {other}: {mean:+.4f} [{low:+.4f}, {high:+.4f}], "
            f"{args.allocator} ahead on {ahead}/{n} seeds"
        )


if __name__ == "__main__":
    main()
