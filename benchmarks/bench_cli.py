"""CLI start-up and planning speed: ``rollcli --help`` wall time (target <= 0.3 s) and
``rollcli plan`` of a spec that expands to 10,000 jobs (target <= 2 s), both as fresh processes.

    python benchmarks/bench_cli.py [--repeats 7] [--json]

Prints the median and the best of ``--repeats`` runs of each; the numbers go to
docs/benchmarks/cli.md.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

TARGETS = {"help": 0.3, "plan_10k": 2.0}


def rollcli_command() -> list[str]:
    script = shutil.which("rollcli") or str(Path(sys.executable).parent / "rollcli")
    if Path(script).exists():
        return [script]
    return [sys.executable, "-c", "from rollcli.cli.app import main; main()"]


def spec_10k(folder: Path) -> Path:
    """100 allocators (25 of each main kind, different knobs) x 100 seeds = 10,000 train jobs."""
    allocators = {}
    for i in range(25):
        allocators[f"grpo{i}"] = {"kind": "uniform", "n": [4, 8, 16, 32, 64][i % 5]}
        allocators[f"dapo{i}"] = {
            "kind": "dynamic",
            "n": [4, 8, 16][i % 3],
            "gen_batch_factor": 1 + i % 4,
        }
        allocators[f"pc{i}"] = {
            "kind": "pilot_commit",
            "n_pilot": 4,
            "n_commit": 12,
            "p_lower": round(0.05 * (i % 5), 2),
            "p_upper": round(0.6 + 0.01 * i, 2),
        }
        allocators[f"vigor{i}"] = {
            "kind": "vigor",
            "m0": 2,
            "alpha": 0.5,
            "gamma": 2,
            "rounds": 2 + i % 3,
        }
    spec = {
        "name": "bench-10k",
        "backend": {"kind": "sim"},
        "budget": {"steps": 100, "rollouts_per_step": 1024},
        "allocators": allocators,
        "seeds": list(range(100)),
        "target": {"baseline": "grpo0"},
        "tracking": {"wandb": {"mode": "disabled"}},
    }
    path = folder / "bench-10k.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def timed(cmd: list[str], repeats: int) -> tuple[list[float], list[float]]:
    """Wall and CPU (user + sys) seconds of each run; CPU time is what a busy machine does not
    inflate much, so both are reported."""
    walls, cpus = [], []
    for _ in range(repeats):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        walls.append(time.perf_counter() - start)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    return walls, cpus


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    rollcli = rollcli_command()
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        spec = spec_10k(Path(tmp))
        count = json.loads(
            subprocess.run(
                [*rollcli, "plan", str(spec), "--json"], check=True, capture_output=True, text=True
            ).stdout
        )["totals"]["jobs"]
        assert count == 10_001, count  # 10,000 train jobs + the report job
        timed([*rollcli, "--help"], 1)  # warm the file cache
        results["help"] = timed([*rollcli, "--help"], args.repeats)
        results["plan_10k"] = timed([*rollcli, "plan", str(spec)], args.repeats)
    summary = {
        name: {
            "median_s": round(statistics.median(walls), 3),
            "best_s": round(min(walls), 3),
            "cpu_median_s": round(statistics.median(cpus), 3),
            "target_s": TARGETS[name],
            "ok": statistics.median(walls) <= TARGETS[name],
            "load_avg_1m": round(os.getloadavg()[0], 2),
        }
        for name, (walls, cpus) in results.items()
    }
    if args.json:
        print(json.dumps(summary, indent=2))
        return
    for name, row in summary.items():
        mark = "ok" if row["ok"] else "OVER TARGET"
        print(
            f"{name:10s} median {row['median_s']:.3f} s  best {row['best_s']:.3f} s  "
            f"cpu {row['cpu_median_s']:.3f} s  (target {row['target_s']} s) {mark}  "
            f"[load {row['load_avg_1m']}]"
        )


if __name__ == "__main__":
    main()
