"""Sweep benchmarks: expanding a 10,000-point sweep, planning points, and running a 200-point
sim sweep locally.

    python benchmarks/bench_sweep.py            # writes docs/benchmarks/sweeps.md
    python benchmarks/bench_sweep.py --no-run   # skip the 200-point run

Targets (issue 9): expanding a 10,000-point sweep <= 2 s; a 200-point sim sweep run locally
<= 2 min on 2 cores. Expansion = parsing the axes and producing every point's overrides
(deduplicated); planning = validating each point as a spec and building its jobs, measured
separately because it is what `--dry-run` and `run` pay per point.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

BASE = """\
name: bench-base
backend: {kind: sim, num_train_prompts: 1024, num_eval_prompts: 256}
budget: {steps: 20, rollouts_per_step: 256}
allocators:
  grpo: {kind: uniform, n: 8}
  pc: {kind: pilot_commit, n_pilot: 8, n_commit: 8}
seeds: [0]
eval: {every: 5}
target: {baseline: grpo}
launch: {executor: local}
tracking: {wandb: {mode: disabled}}
checkpoint: {every: 5}
"""


def write(folder: Path, name: str, grid: dict[str, str]) -> Path:
    (folder / "base.yaml").write_text(BASE)
    lines = [f"name: {name}", "base: base.yaml", "grid:"]
    lines += [f'  {key}: "{values}"' for key, values in grid.items()]
    path = folder / f"{name}.yaml"
    path.write_text("\n".join(lines) + "\n")
    return path


def bench_expand(folder: Path) -> dict[str, float]:
    from rollcli.sweep.file import load_sweep_file
    from rollcli.sweep.plan import plan_sweep

    big = write(
        folder,
        "expand",
        {"allocators.pc.p_lower": "range(0,100)", "allocators.pc.n_pilot": "range(1,101)"},
    )
    start = time.perf_counter()
    points = load_sweep_file(big).points()
    expand_s = time.perf_counter() - start
    plannable = write(
        folder,
        "plan",
        {
            "allocators.pc.p_lower": "range(0.0,0.5,0.005)",
            "allocators.pc.p_upper": "range(0.5,1.0,0.05)",
        },
    )
    start = time.perf_counter()
    plan = plan_sweep(load_sweep_file(plannable))
    plan_s = time.perf_counter() - start
    return {
        "points": len(points),
        "expand_s": expand_s,
        "plan_points": len(plan.points),
        "plan_jobs": len(plan.plan),
        "plan_s": plan_s,
    }


def bench_run(folder: Path) -> dict[str, float]:
    sweep = write(
        folder,
        "run200",
        {
            "allocators.pc.p_lower": "range(0.0,0.5,0.025)",
            "allocators.pc.p_upper": "range(0.5,1.0,0.05)",
        },
    )
    env = {**os.environ, "WANDB_MODE": "disabled"}
    start = time.perf_counter()
    subprocess.run(
        [
            sys.executable,
            "-m",
            "rollcli.cli",
            "sweep",
            str(sweep),
            "--runs-dir",
            str(folder / "runs"),
            "-j",
            str(os.cpu_count() or 2),
            "--no-plots",
        ],
        check=True,
        env=env,
        cwd=folder,
        stdout=subprocess.DEVNULL,
    )
    wall = time.perf_counter() - start
    jobs = len(list((folder / "runs" / "run200" / "jobs").iterdir()))
    return {"wall_s": wall, "jobs": jobs}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--no-run", action="store_true", help="skip the 200-point run")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        expand = bench_expand(folder)
        run = None if args.no_run else bench_run(folder)
    load = os.getloadavg()[0]
    lines = [
        "# Sweep benchmarks",
        "",
        f"`python benchmarks/bench_sweep.py` on {time.strftime('%Y-%m-%d')}, {os.cpu_count()} cores, "
        f"load average {load:.1f} at the end.",
        "",
        "| measure | result | target |",
        "|---|---|---|",
        f"| expand a {expand['points']:,}-point grid sweep (parse axes, dedupe overrides) | "
        f"{expand['expand_s']:.2f} s | <= 2 s |",
        f"| validate + plan {expand['plan_points']:,} points ({expand['plan_jobs']:,} jobs) | "
        f"{expand['plan_s']:.2f} s ({1000 * expand['plan_s'] / expand['plan_points']:.1f} ms/point) | - |",
    ]
    if run is not None:
        lines.append(
            f"| run a 200-point sim sweep locally ({run['jobs']} jobs, 20 steps x 256 rollouts each) | "
            f"{run['wall_s']:.0f} s | <= 120 s |"
        )
    text = "\n".join(lines) + "\n"
    print(text)
    out = REPO / "docs" / "benchmarks" / "sweeps.md"
    out.write_text(text)


if __name__ == "__main__":
    main()
