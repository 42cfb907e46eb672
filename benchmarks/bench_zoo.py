"""The zoo's sensitivity table: every allocator's speedup over uniform at each sim noise level.

Reuses ``benchmarks/bench_core.py``'s part (c) (``sim_targets``: the same job configs, knob
overrides, statistics and table) on every allocator registered on main, at the pre-registered
noise levels (score_noise 5 / 10 / 20 / 40, the default 10), without uniform's learning-rate grid
(docs/benchmarks/core.md has it). The main zoo table comes from ``rollcli run
experiments/zoo-sim.yaml`` (10 seeds); this one uses ``--seeds`` seeds (5 by default: 11+
allocators x 4 levels is the CPU this machine has) and says so. Writes
``docs/benchmarks/zoo-sensitivity.md``.

    nice -n 10 python benchmarks/bench_zoo.py --jobs 2 --cache DIR [--seeds 5] [--kinds a,b]
"""

from __future__ import annotations

import argparse
import datetime
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_core import (  # noqa: E402
    BUDGET,
    NOISE_LEVELS,
    STEPS,
    allocator_config,
    runnable_kinds,
    to_markdown,
)
from sim_targets import Scenario, TargetPlan, run_all, target_tables  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "docs" / "benchmarks" / "zoo-sensitivity.md"


def main(argv: list[str] | None = None) -> None:
    from rollcli.backends.sim import SimConfig
    from rollcli.store.atomic import atomic_write_text

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--jobs", type=int, default=1, help="processes")
    parser.add_argument("--cache", type=Path, help="folder caching the runs")
    parser.add_argument("--seeds", type=int, default=5, help="seeds 0..N-1 per allocator and level")
    parser.add_argument("--kinds", default="", help="comma-separated kinds (default: every one)")
    parser.add_argument("--out", type=Path, default=OUT, help="Markdown file to write")
    args = parser.parse_args(argv)
    kinds, skipped = runnable_kinds()
    if args.kinds:
        wanted = ["uniform", *[k for k in args.kinds.split(",") if k and k != "uniform"]]
        kinds = [k for k in wanted if k in kinds]
    defaults = SimConfig()
    plan = TargetPlan(
        kinds=kinds,
        allocators={k: allocator_config(k) for k in kinds},
        seeds=list(range(args.seeds)),
        main=Scenario(
            "default", BUDGET, STEPS, {"score_noise": defaults.score_noise, "lr": defaults.lr}
        ),
        noise_levels=NOISE_LEVELS,
        lr_grid=[defaults.lr],
    )
    planned = plan.runs()
    print(f"{len(planned)} runs ({len(kinds)} allocators x {args.seeds} seeds x "
          f"{len(NOISE_LEVELS)} levels)", flush=True)  # fmt: skip
    started, cpu0 = time.perf_counter(), os.times()
    results = run_all([c for _, c in planned], jobs=args.jobs, cache=args.cache)
    tables, summary = target_tables(plan, dict(zip([k for k, _ in planned], results, strict=True)))
    wall = time.perf_counter() - started
    cpu1 = os.times()
    cpu = (cpu1.user - cpu0.user) + (cpu1.children_user - cpu0.children_user)
    load = os.getloadavg()[0]
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    command = " ".join(
        ["python benchmarks/bench_zoo.py", *(sys.argv[1:] if argv is None else argv)]
    )
    text = "\n".join(
        [
            "# Zoo sensitivity (sim, every allocator, noise levels)",
            "",
            f"Command: `{command}` ({wall:.0f} s wall, {cpu:.0f} s CPU with its workers, load "
            f"{load:.1f} on {os.cpu_count()} CPUs at the end). Written {now}. Allocators at their"
            " default knobs with bench_core's overrides"
            + (f"; not run (defaults do not fit): {skipped}" if skipped else "")
            + f". Best allocator per score_noise: {summary['best_at_noise']}.",
            "",
            to_markdown(*tables[0]),
            to_markdown(*tables[2]),
        ]
    )
    atomic_write_text(args.out, text)
    print(text)


if __name__ == "__main__":
    sys.exit(main())
