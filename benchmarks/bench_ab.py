"""Interleaved A/B of the sim train loop's throughput across source trees (steps per CPU-second).

Absolute speed differs between sessions on a shared VM, so a throughput target is judged as a
ratio against a reference tree measured in the same run. Each round runs every variant once, in
a fresh process whose ``PYTHONPATH`` is that variant's tree, and times ``--steps`` train-loop
steps (uniform, 512 prompts x 8 rollouts, metrics rows built, no evaluation) in CPU seconds
after ``--warmup`` steps. It prints each round and the median ratio of every variant to the
first one::

    python benchmarks/bench_ab.py old=/work/wt/oldsim \\
        "new=.:{'num_minibatches': 1, 'prompt_lr': 0.0}" default=.

A variant is ``NAME=TREE`` or ``NAME=TREE:BACKEND``, ``BACKEND`` a Python dict literal of sim
backend knobs added to the job's ``backend`` section. The tree needs ``benchmarks/bench_core.py``
with ``job_config`` and ``create_job_loop`` (every tree since issue 12's benchmark).
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

# run inside the child, in the tree under test (its bench_core, its rollcli)
_CHILD = """
import json, sys, time
sys.path.insert(0, sys.argv[1] + "/benchmarks")
from bench_core import create_job_loop, job_config
backend, warmup, steps = json.loads(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
# one step more than run: the last step evaluates, and no step run here does (every tree)
loop = create_job_loop(job_config("uniform", seed=0, budget=4096, steps=warmup + steps + 1,
                                  backend=backend))
loop.eval_every = 0
for _ in range(warmup):
    loop.run_step()
t0 = time.process_time()
for _ in range(steps):
    loop.run_step()
print(steps / (time.process_time() - t0))
"""


def parse_variant(text: str) -> tuple[str, Path, dict]:
    """``NAME=TREE[:BACKEND]`` -> (name, tree, backend knobs)."""
    name, sep, rest = text.partition("=")
    if not sep or not name:
        raise argparse.ArgumentTypeError(f"variant {text!r}: expected NAME=TREE[:BACKEND]")
    tree, _, knobs = rest.partition(":")
    backend = ast.literal_eval(knobs) if knobs else {}
    if not isinstance(backend, dict):
        raise argparse.ArgumentTypeError(f"variant {name}: BACKEND must be a dict literal")
    path = Path(tree).resolve()
    if not (path / "benchmarks" / "bench_core.py").is_file():
        raise argparse.ArgumentTypeError(f"variant {name}: {path} has no benchmarks/bench_core.py")
    return name, path, backend


def measure(tree: Path, backend: dict, warmup: int, steps: int) -> float:
    """Steps per CPU-second of one fresh process running ``tree``'s code."""
    env = {**os.environ, "PYTHONPATH": str(tree), "OMP_NUM_THREADS": "1"}
    out = subprocess.run(
        [sys.executable, "-c", _CHILD, str(tree), json.dumps(backend), str(warmup), str(steps)],
        env=env,
        cwd=tree,  # python -c puts the working directory first on sys.path
        capture_output=True,
        text=True,
    )
    if out.returncode:
        sys.exit(f"{tree}: the benchmark process failed:\n{out.stderr}")
    return float(out.stdout.split()[-1])


def main(argv: list[str] | None = None) -> None:
    """Run the rounds and print the table of steps/s and ratios to the first variant."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("variants", nargs="+", type=parse_variant, help="NAME=TREE[:BACKEND]")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--steps", type=int, default=150)
    args = parser.parse_args(argv)
    results: dict[str, list[float]] = {name: [] for name, _, _ in args.variants}
    for r in range(args.rounds):
        line = []
        for name, tree, backend in args.variants:
            value = measure(tree, backend, args.warmup, args.steps)
            results[name].append(value)
            line.append(f"{name} {value:.0f}")
        print(f"round {r + 1}: " + ", ".join(line), flush=True)
    ref = args.variants[0][0]
    for name, values in results.items():
        ratios = [v / b for v, b in zip(values, results[ref], strict=True)]
        print(
            f"{name}: median {statistics.median(values):.0f} steps/cpu-s, "
            f"median ratio to {ref} {statistics.median(ratios):.3f} "
            f"(range {min(ratios):.3f}-{max(ratios):.3f})"
        )


if __name__ == "__main__":
    main()
