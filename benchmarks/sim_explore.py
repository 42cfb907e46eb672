"""Exploratory sim scenarios, added after the pre-registered benchmark (not part of its plan).

Run ``nice -n 10 python benchmarks/sim_explore.py [--jobs 2] [--cache DIR]``. Every registered
allocator at its defaults, 10 seeds, on variants of the default scenario that the
pre-registered results raised questions about (docs/sim.md, "What the benchmark shows"):

- ``lr 0.012``: uniform's best learning rate of the grid, for every allocator -- does the
  ranking survive when the learning rate no longer limits progress?
- ``pool 16384``: four times the training pool, so 200 steps are ~6 epochs instead of 25 --
  how much of the ranking comes from prompts being memorised and the pool running dry?

The statistics are part (c)'s (``benchmarks/sim_targets.py``); the target in each scenario is
uniform's own final accuracy there. It prints the tables and writes them, with the command, to
``docs/benchmarks/sim-explore.md``.
"""

from __future__ import annotations

import argparse
import datetime
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_core import ROOT, allocator_config, runnable_kinds, to_markdown  # noqa: E402
from sim_targets import Scenario, TargetPlan, run_all, target_tables  # noqa: E402

from rollcli.backends.sim import SimConfig  # noqa: E402
from rollcli.store.atomic import atomic_write_text  # noqa: E402

OUT = ROOT / "docs" / "benchmarks" / "sim-explore.md"
SEEDS = list(range(10))
DEFAULTS = SimConfig()
SCENARIOS = [
    Scenario("lr 0.012", 4096, 200, {"score_noise": DEFAULTS.score_noise, "lr": 0.012}),
    Scenario("pool 16384", 4096, 200,
             {"score_noise": DEFAULTS.score_noise, "lr": DEFAULTS.lr, "num_train_prompts": 16384}),
]  # fmt: skip


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--cache", type=Path)
    args = parser.parse_args(argv)
    kinds, _ = runnable_kinds()
    sections = []
    for scenario in SCENARIOS:
        plan = TargetPlan(
            kinds=kinds,
            allocators={k: allocator_config(k) for k in kinds},
            seeds=SEEDS,
            main=scenario,
            noise_levels=[scenario.backend["score_noise"]],
            lr_grid=[scenario.backend["lr"]],
        )
        planned = plan.runs()
        results = run_all([c for _, c in planned], jobs=args.jobs, cache=args.cache)
        tables, _ = target_tables(plan, dict(zip([k for k, _ in planned], results, strict=True)))
        title, header, rows = tables[0]
        title = title.replace("(c) Rollouts-to-target, default sim scenario",
                              f"Rollouts-to-target, exploratory scenario '{scenario.name}' "
                              f"(SimConfig() with {dict(scenario.backend)})")  # fmt: skip
        title = title.split("; vs best-lr")[0] + "; columns as in core.md (c))"
        header, rows = header[:4] + header[5:], [r[:4] + r[5:] for r in rows]  # no best-lr column
        sections.append(to_markdown(title, header, rows))
        print(sections[-1])
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    command = " ".join(
        ["python benchmarks/sim_explore.py", *(sys.argv[1:] if argv is None else argv)]
    )
    part = ["# Exploratory sim scenarios (after the pre-registered results)", "",
            "Not pre-registered: chosen after reading docs/benchmarks/core.md part (c); the "
            "reading is in docs/sim.md. " f"Command: `{command}`, {now}.", "", *sections]  # fmt: skip
    atomic_write_text(OUT, "\n".join(part))


if __name__ == "__main__":
    main()
