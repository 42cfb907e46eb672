"""Core benchmark: allocator decision time, sim throughput, and rollouts-to-target on the sim.

Run ``nice -n 10 python benchmarks/bench_core.py [--jobs 2] [--cache DIR]`` (part (c) is
~1,000 sim runs: tens of CPU minutes). It prints rich tables and writes them, with the
command, the machine and the settings, to ``docs/benchmarks/core.md``. ``--only
decision|throughput|target`` runs one part and replaces only that part's tables in the file;
``--cache DIR`` keeps each run's curves keyed by its config and the code it ran, so a re-render
reruns nothing:

(a) allocator decision time per step (start_step/ask/tell/train_groups/live_refs, generation
    excluded) for pools of 1k, 10k and 100k prompts, every registered allocator, 4096 rollouts
    per step, default knobs; target <= 1 ms per 1k prompts per step;
(b) sim steps per second at 512 prompts x 8 rollouts with ``uniform`` (and 64 x 8) on the
    default sim (4 mini-batches, per-prompt learning), through the bare protocol and through the
    train loop (metrics rows included); target >= 500 steps/s for the train loop;
(c) rollouts-to-target on the default sim scenario (``SimConfig()``), every registered
    allocator with default knobs, equal per-step budget, 10 seeds (statistics in
    ``benchmarks/sim_targets.py``): speedup vs uniform with bootstrap intervals, and vs uniform
    at the best learning rate of a grid; the learning-rate grid itself; and a sensitivity table
    of every allocator at four score-noise levels (per-step signal-to-noise ratios).

The scenario is not tuned to favour any allocator: ``SimConfig`` defaults were calibrated on
uniform alone and pre-registered in docs/LOG.md before any other allocator ran on them.
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")  # one core, before numpy loads
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")

import datetime  # noqa: E402
import platform  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402
from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from rollcli.allocators import create_allocator  # noqa: E402
from rollcli.allocators.registry import ALLOCATORS  # noqa: E402
from rollcli.backends.sim import create_sim_backend  # noqa: E402
from rollcli.jobs.train import create_job_loop  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from sim_targets import Scenario, TargetPlan, run_all, target_tables  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "docs" / "benchmarks" / "core.md"
# Knobs changed from the defaults, and why: a run that raises at its give-up point measures
# nothing, so DAPO trains on what it has after max_gen_batches and PC and GRESO end the step
# after max_rounds (documented alternatives of their allocators).
OVERRIDES: dict[str, dict[str, Any]] = {
    "dynamic": {"on_max_gen_batches": "train"},
    "pilot_commit": {"on_max_rounds": "stop"},
    "greso": {"on_max_rounds": "stop"},
    # 4 + 20 rollouts do not divide 4096; 4 + 12 is the official recipe's config default
    # (recipe/dapo/src/config/fast_dapo_trainer.yaml); train what is complete at the give-up point
    "speed": {"n_continue": 12, "on_max_gen_calls": "train"},
}
BUDGET = 4096
SEEDS = list(range(10))
STEPS = 200
# Pre-registered in docs/LOG.md with the defaults: the sensitivity levels (score_noise; the
# default's noise scale is ~1 at the start) and uniform's learning-rate grid (the default 0.003
# with half, double and four times it).
NOISE_LEVELS = [5.0, 10.0, 20.0, 40.0]
LR_GRID = [0.0015, 0.003, 0.006, 0.012]


def allocator_config(kind: str) -> dict[str, Any]:
    return {"kind": kind, **OVERRIDES.get(kind, {})}


def job_config(kind: str, *, seed: int, budget: int, steps: int, backend: dict[str, Any]) -> dict:
    return {
        "job": {"id": f"{kind}-{seed}", "type": "train", "allocator": kind, "seed": seed},
        "backend": {"kind": "sim", **backend},
        "allocator": allocator_config(kind),
        "budget": {"steps": steps, "rollouts_per_step": budget},
        "eval": {"every": 1},
    }


# -- (a) decision time -----------------------------------------------------------------------
def decision_cpu_s(allocator: Any, backend: Any) -> tuple[float, int]:
    """One step through the protocol: CPU seconds inside the allocator's calls, outcomes told.

    CPU time (not wall) so that other processes on a shared machine do not inflate it.
    """
    clock = time.process_time
    spent = 0.0
    t0 = clock()
    allocator.start_step(allocator.step + 1)
    while True:
        ask = allocator.ask()
        spent += clock() - t0
        if ask is None:
            break
        outcomes = backend.generate(ask)
        t0 = clock()
        allocator.tell(outcomes)
    t0 = clock()
    groups = allocator.train_groups()
    spent += clock() - t0
    backend.update(groups)
    t0 = clock()
    live = allocator.live_refs()
    spent += clock() - t0
    backend.retain(live)
    return spent, allocator.ledger.step_groups


def bench_decision(kinds: list[str]) -> list[dict[str, Any]]:
    results = []
    for pool in (1_000, 10_000, 100_000):
        for kind in kinds:
            backend = {"num_train_prompts": pool, "num_eval_prompts": 64}
            loop = create_job_loop(
                job_config(kind, seed=0, budget=BUDGET, steps=60, backend=backend)
            )
            for _ in range(3):
                decision_cpu_s(loop.allocator, loop.backend)
            measured = [decision_cpu_s(loop.allocator, loop.backend) for _ in range(25)]
            times = [t for t, _ in measured]
            told = statistics.mean(n for _, n in measured)
            ms = 1000 * statistics.median(times)
            results.append(
                {
                    "pool": pool,
                    "allocator": kind,
                    "median_ms": ms,
                    "max_ms": 1000 * max(times),
                    "ms_per_1k": ms / (pool / 1000),
                    "told": told,
                    "us_per_outcome": 1000 * ms / told,
                }
            )
    return results


# -- (b) sim throughput ----------------------------------------------------------------------
def bare_step(alloc: Any, backend: Any, step: int) -> float:
    """One protocol step; returns the CPU seconds spent inside the backend's calls."""
    clock = time.process_time
    spent = 0.0
    alloc.start_step(step)
    while (ask := alloc.ask()) is not None:
        t0 = clock()
        outcomes = backend.generate(ask)
        spent += clock() - t0
        alloc.tell(outcomes)
    groups = alloc.train_groups()
    t0 = clock()
    backend.update(groups)
    spent += clock() - t0
    live = alloc.live_refs()
    t0 = clock()
    backend.retain(live)
    return spent + clock() - t0


def bench_throughput() -> list[dict[str, Any]]:
    results = []
    for prompts in (512, 64):
        budget = prompts * 8
        backend = create_sim_backend({"kind": "sim"}, seed=0)
        alloc = create_allocator(
            {"kind": "uniform", "n": 8},
            num_prompts=backend.num_prompts,
            rollouts_per_step=budget,
            seed=0,
        )

        num = 300
        for s in range(10):
            bare_step(alloc, backend, s)
        t0 = time.process_time()
        backend_cpu = sum(bare_step(alloc, backend, s) for s in range(10, 10 + num))
        bare = num / (time.process_time() - t0)
        loop = create_job_loop(
            job_config("uniform", seed=0, budget=budget, steps=num + 10, backend={})
        )
        loop.eval_every = 0
        for _ in range(10):
            loop.run_step()
        t0 = time.process_time()
        rows = [loop.run_step() for _ in range(num - 1)]
        cpu = time.process_time() - t0
        results.append(
            {
                "shape": f"{prompts} x 8",
                "bare": bare,
                "backend_only": num / backend_cpu,
                "loop": len(rows) / cpu,
                "gen_ms": 1000 * np.mean([r["time/generate_s"] for r in rows]),
                "alloc_ms": 1000 * np.mean([r["time/allocate_s"] for r in rows]),
                "update_ms": 1000 * np.mean([r["time/update_s"] for r in rows]),
            }
        )
    return results


# -- (c) rollouts-to-target ------------------------------------------------------------------
def runnable_kinds() -> tuple[list[str], dict[str, str]]:
    """Every registered kind, uniform first, that accepts the benchmark's budget and pool."""
    from rollcli.backends.sim import SimConfig

    kinds, skipped = [], {}
    for kind in ["uniform", *sorted(k for k in ALLOCATORS if k != "uniform")]:
        try:
            create_allocator(allocator_config(kind), num_prompts=SimConfig().num_train_prompts,
                             rollouts_per_step=BUDGET, seed=0, oracle=lambda ids: ids * 0.0)  # fmt: skip
        except ValueError as err:
            skipped[kind] = str(err)
            continue
        kinds.append(kind)
    return kinds, skipped


def command(argv: list[str] | None) -> str:
    args = sys.argv[1:] if argv is None else argv
    return " ".join(["python benchmarks/bench_core.py", *args])


def target_plan(kinds: list[str]) -> TargetPlan:
    from rollcli.backends.sim import SimConfig

    defaults = SimConfig()
    main = Scenario("default", BUDGET, STEPS,
                    {"score_noise": defaults.score_noise, "lr": defaults.lr})  # fmt: skip
    return TargetPlan(
        kinds=kinds,
        allocators={k: allocator_config(k) for k in kinds},
        seeds=SEEDS,
        main=main,
        noise_levels=NOISE_LEVELS,
        lr_grid=LR_GRID,
    )


# -- rendering -------------------------------------------------------------------------------
def fmt(value: Any, spec: str = ".2f") -> str:
    if value is None:
        return "not reached"
    if isinstance(value, tuple):
        return f"{value[0]:{spec}}-{value[1]:{spec}}"
    if isinstance(value, float):
        return f"{value:{spec}}"
    return str(value)


def tables(decision, throughput, targets) -> list[tuple[str, list[str], list[list[str]]]]:
    out = [
        (
            f"(a) Allocator decision time per step ({BUDGET} rollouts/step, default knobs; "
            "generation excluded; target <= 1 ms per 1k prompts)",
            [
                "pool",
                "allocator",
                "median CPU ms/step",
                "max CPU ms/step",
                "ms per 1k prompts",
                "target",
                "outcomes told/step",
                "us per outcome",
            ],
            [
                [
                    f"{r['pool']:,}",
                    r["allocator"],
                    fmt(r["median_ms"]),
                    fmt(r["max_ms"]),
                    fmt(r["ms_per_1k"], ".3f"),
                    "ok" if r["ms_per_1k"] <= 1.0 else "MISSED",
                    fmt(r["told"], ".0f"),
                    fmt(r["us_per_outcome"], ".1f"),
                ]
                for r in decision
            ],  # fmt: skip
        ),
        (
            "(b) Sim steps per CPU second, uniform n=8, default sim (4 mini-batches, per-prompt learning), one thread (target >= 500 at 512 x 8 for the train loop). Sim backend alone: generate + update + retain; bare protocol: plus allocator and ledger; train loop: plus metrics rows. Phase times are wall ms per step of the train loop",
            [
                "prompts x rollouts",
                "sim backend alone steps/s",
                "bare protocol steps/s",
                "train loop steps/s",
                "generate ms",
                "allocate ms",
                "update ms",
            ],  # fmt: skip
            [
                [
                    r["shape"],
                    fmt(r["backend_only"], ".0f"),
                    fmt(r["bare"], ".0f"),
                    fmt(r["loop"], ".0f"),
                    fmt(r["gen_ms"], ".3f"),
                    fmt(r["alloc_ms"], ".3f"),
                    fmt(r["update_ms"], ".3f"),
                ]
                for r in throughput
            ],  # fmt: skip
        ),
    ]
    out += targets
    return out


def to_markdown(title: str, header: list[str], rows: list[list[str]]) -> str:
    lines = [f"### {title}", "", "| " + " | ".join(header) + " |"]
    lines.append("|" + "|".join("---" for _ in header) + "|")
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


PARTS = {"decision": "(a)", "throughput": "(b)", "target": "(c)"}


def replace_part(text: str, label: str, sections: list[str], note: str) -> str:
    """``text`` (core.md) with its ``### <label> ...`` sections replaced by ``sections``."""
    head, *old = text.split("\n### ")
    old = ["### " + sec for sec in old]
    kept = [sec for sec in old if not sec.startswith(f"### {label} ")]
    if len(kept) == len(old):
        raise SystemExit(f"{OUT} has no {label} table to replace; run the whole benchmark")
    first = next(i for i, sec in enumerate(old) if sec.startswith(f"### {label} "))
    new = [sec.rstrip("\n") + "\n" for sec in sections]
    new[-1] += f"\n{note}\n"
    merged = kept[:first] + new + kept[first:]
    return head.rstrip("\n") + "\n\n" + "\n".join(merged)


def main(argv: list[str] | None = None) -> None:
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--only", choices=sorted(PARTS), help="run one part; update its tables")
    parser.add_argument("--jobs", type=int, default=1, help="processes for part (c)")
    parser.add_argument("--cache", type=Path, help="folder caching part (c)'s runs")
    parser.add_argument(
        "--kinds",
        help="with --only decision: time only these comma-separated kinds and print their rows "
        "(docs/benchmarks/core.md is left as it is: its table holds every kind)",
    )
    args = parser.parse_args(argv)
    if args.kinds and args.only != "decision":
        parser.error("--kinds goes with --only decision")
    only = args.only
    console = Console(width=220)
    kinds, skipped = runnable_kinds()
    started = time.perf_counter()
    cpu_started = time.process_time()
    decision: list[dict[str, Any]] = []
    throughput: list[dict[str, Any]] = []
    targets = []
    if only in (None, "decision"):
        console.print("[bold](a)[/] decision time ...")
        decision = bench_decision(args.kinds.split(",") if args.kinds else sorted(ALLOCATORS))
    if only in (None, "throughput"):
        console.print("[bold](b)[/] sim throughput ...")
        throughput = bench_throughput()
    if only in (None, "target"):
        plan = target_plan(kinds)
        planned = plan.runs()
        console.print(f"[bold](c)[/] rollouts-to-target: {len(planned)} runs ...")
        results = run_all([c for _, c in planned], jobs=args.jobs, cache=args.cache)
        targets, summary = target_tables(
            plan, dict(zip([k for k, _ in planned], results, strict=True))
        )
        console.print(f"best lr of uniform's grid: {summary['best_lr']:g}; best allocator per "
                      f"score_noise: {summary['best_at_noise']}")  # fmt: skip
    elapsed = time.perf_counter() - started
    cpu = time.process_time() - cpu_started
    rendered = tables(decision, throughput, targets)
    if only is not None:
        rendered = [t for t in rendered if t[0].startswith(PARTS[only])]
    for title, header, rows in rendered:
        table = Table(title=title, title_justify="left")
        for column in header:
            table.add_column(column)
        for row in rows:
            table.add_row(*row)
        console.print(table)
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    from rollcli.store.atomic import atomic_write_text

    if args.kinds:
        return
    if only is not None:
        # CPU times inflate on an oversubscribed machine (shared caches): say how loaded it was
        load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
        note = (
            f"{PARTS[only]} rerun alone: `{command(argv)}` ({elapsed:.0f} s wall, "
            f"{cpu:.0f} s CPU in this process, load average {load:.1f} on "
            f"{os.cpu_count()} CPUs), {now}; the other tables are from the run above."
        )
        text = replace_part(OUT.read_text(), PARTS[only], [to_markdown(*t) for t in rendered], note)
        atomic_write_text(OUT, text)
        console.print(f"updated {PARTS[only]} in {OUT.relative_to(ROOT)} in {elapsed:.0f} s")
        return
    header = [
        "# Core benchmark (allocators on the sim backend)",
        "",
        f"Command: `{command(argv)}` ({elapsed:.0f} s wall). Written {now}.",
        f"Machine: {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs visible, "
        f"one thread; Python {platform.python_version()}, numpy {np.__version__}.",
        "",
        "Allocators use their default knobs"
        + "".join(f"; `{k}` with {v}" for k, v in OVERRIDES.items())
        + (f". Not run (their defaults do not fit the benchmark): {skipped}." if skipped else ".")
        + " The sim scenario is `SimConfig()` (docs/sim.md). Accuracy is the expected held-out"
        " accuracy after every step. Reading the results: docs/sim.md, section 'What the"
        " benchmark shows'.",
        "",
    ]
    body = "\n".join(to_markdown(*t) for t in rendered)
    atomic_write_text(OUT, "\n".join(header) + "\n" + body)
    console.print(f"wrote {OUT.relative_to(ROOT)} in {elapsed:.0f} s")


if __name__ == "__main__":
    sys.exit(main())
