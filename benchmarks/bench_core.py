"""Core benchmark: allocator decision time, sim throughput, and rollouts-to-target on the sim.

Run ``python benchmarks/bench_core.py`` (a few minutes on one core). It prints three rich
tables and writes them, with the command, the machine and the settings, to
``docs/benchmarks/core.md``. ``--only decision|throughput|target`` runs one part and replaces
only that part's tables in the file:

(a) allocator decision time per step (start_step/ask/tell/train_groups/live_refs, generation
    excluded) for pools of 1k, 10k and 100k prompts, every registered allocator, 4096 rollouts
    per step, default knobs; target <= 1 ms per 1k prompts per step;
(b) sim steps per second at 512 prompts x 8 rollouts with ``uniform`` (and 64 x 8), through the
    bare protocol and through the train loop (metrics rows included); target >= 1000 steps/s;
(c) rollouts-to-target on the default sim scenario (``SimConfig()``), uniform / dynamic /
    pilot_commit / vigor / oracle with default knobs, equal per-step budget, >= 5 seeds: the
    cumulative rollouts and tokens at which each run first reaches the uniform run's final
    held-out accuracy of the same seed (linear interpolation), speedup vs uniform (mean, min-max
    over seeds), final accuracy. A second scenario at a quarter of the per-step budget shows how
    the ranking moves when updates are noise-limited.

The scenario is not tuned to favour any allocator: ``SimConfig`` defaults are calibrated in
docs/sim.md before any allocator was run on them.
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
from rollcli.train.job import create_job_loop  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "docs" / "benchmarks" / "core.md"
COMPARED = ["uniform", "dynamic", "pilot_commit", "vigor", "oracle"]
# Knobs changed from the defaults, and why: a run that raises at its give-up point measures
# nothing, so DAPO trains on what it has after max_gen_batches and PC ends the step after
# max_rounds (both documented alternatives of their allocators).
OVERRIDES: dict[str, dict[str, Any]] = {
    "dynamic": {"on_max_gen_batches": "train"},
    "pilot_commit": {"on_max_rounds": "stop"},
}
BUDGET = 4096
SEEDS = [0, 1, 2, 3, 4]
STEPS = 200
# name, rollouts per step, steps, sim knobs changed from SimConfig(). The first is the headline;
# the others show why the ranking is what it is (docs/sim.md): a quarter of the budget per step
# (noise-limited updates), and plain SGD, whose step grows with the mean gradient over the
# trained rollouts (lr chosen so uniform gains about as much as with the default Adam).
SCENARIOS: list[tuple[str, int, int, dict[str, Any]]] = [
    ("default", BUDGET, STEPS, {}),
    ("noise-limited", BUDGET // 4, 2 * STEPS, {}),
    ("SGD update", BUDGET, STEPS, {"optimizer": "sgd", "lr": 0.03}),
]


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
def first_crossing(xs: np.ndarray, ys: np.ndarray, target: float) -> float:
    """x at which ys first reaches target (rollcli.analysis's rule); nan if never."""
    from rollcli.analysis.curves import first_crossing as crossing

    value = crossing(xs, ys, target).number()
    return float("nan") if value is None else value


def run_curve(
    kind: str, seed: int, budget: int, steps: int, backend: dict[str, Any]
) -> dict[str, np.ndarray]:
    loop = create_job_loop(job_config(kind, seed=seed, budget=budget, steps=steps, backend=backend))
    rows = [loop.initial_row()]
    while not loop.done:
        rows.append(loop.run_step())
    return {
        "rollouts": np.array([r["cum_rollouts"] for r in rows], float),
        "tokens": np.array([r["cum_tokens"] for r in rows], float),
        "steps": np.arange(len(rows), dtype=float),
        "acc": np.array([r["eval/accuracy"] for r in rows]),
        "evicted": rows[-1]["evicted"],
        "zero_var": float(np.mean([r["zero_var_frac"] for r in rows[1:]])),
        "trained_share": float(
            sum(r["rollouts_trained"] for r in rows[1:]) / rows[-1]["cum_rollouts"]
        ),
    }


def bench_target(
    kinds: list[str], budget: int, steps: int, backend: dict[str, Any]
) -> list[dict[str, Any]]:
    curves = {(k, s): run_curve(k, s, budget, steps, backend) for k in kinds for s in SEEDS}
    results = []
    for kind in kinds:
        per_seed: dict[str, list[float]] = {
            m: []
            for m in (
                "rollouts",
                "tokens",
                "speedup",
                "tok_speedup",
                "steps",
                "final",
                "at_budget",
                "bound",
            )
        }
        for s in SEEDS:
            base, run = curves[("uniform", s)], curves[(kind, s)]
            target = float(base["acc"][-1])
            for axis, key in (("rollouts", "speedup"), ("tokens", "tok_speedup")):
                x_base = first_crossing(base[axis], base["acc"], target)
                x_run = first_crossing(run[axis], run["acc"], target)
                per_seed[axis].append(x_run)
                per_seed[key].append(x_base / x_run if x_run == x_run else float("nan"))
                if axis == "rollouts" and x_run != x_run:  # not reached: an upper bound
                    per_seed["bound"].append(x_base / run["rollouts"][-1])
            per_seed["steps"].append(first_crossing(run["steps"], run["acc"], target))
            per_seed["final"].append(float(run["acc"][-1]))
            at_budget = base["rollouts"][-1]
            per_seed["at_budget"].append(
                float(np.interp(at_budget, run["rollouts"], run["acc"]))
                if run["rollouts"][-1] >= at_budget
                else float("nan")
            )
        speed = np.array(per_seed["speedup"])
        reached = ~np.isnan(speed)
        results.append(
            {
                "allocator": kind,
                "reached": f"{int(reached.sum())}/{len(SEEDS)}"
                + "".join(f", one < {b:.2f}" for b in per_seed["bound"]),
                "rollouts_M": np.nanmean(per_seed["rollouts"]) / 1e6 if reached.any() else None,
                "tokens_B": np.nanmean(per_seed["tokens"]) / 1e9 if reached.any() else None,
                "speedup": float(np.nanmean(speed)) if reached.any() else None,
                "spread": (float(np.nanmin(speed)), float(np.nanmax(speed)))
                if reached.any()
                else None,
                "tok_speedup": float(np.nanmean(per_seed["tok_speedup"]))
                if reached.any()
                else None,
                "steps": float(np.nanmean(per_seed["steps"])) if reached.any() else None,
                "final": float(np.mean(per_seed["final"])),
                "final_sd": float(np.std(per_seed["final"])),
                "at_budget": float(np.nanmean(per_seed["at_budget"])),
                "trained_share": float(
                    np.mean([curves[(kind, s)]["trained_share"] for s in SEEDS])
                ),
                "zero_var": float(np.mean([curves[(kind, s)]["zero_var"] for s in SEEDS])),
                "evicted": float(np.mean([curves[(kind, s)]["evicted"] for s in SEEDS])),
                "rollouts_per_step": float(
                    np.mean([curves[(kind, s)]["rollouts"][-1] / steps for s in SEEDS])
                ),
            }
        )
    return results


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
            "(b) Sim steps per CPU second, uniform n=8, one thread (target >= 1000 at 512 x 8). Sim backend alone: generate + update + retain; bare protocol: plus allocator and ledger; train loop: plus metrics rows. Phase times are wall ms per step of the train loop",
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
    for name, budget, steps, knobs, rows in targets:
        out.append(
            (
                f"(c) Rollouts-to-target, {name} sim scenario "
                f"({'SimConfig() with ' + str(knobs) + ', ' if knobs else ''}{budget} rollouts/step, {steps} "
                f"steps, seeds {SEEDS[0]}-{SEEDS[-1]}; target = uniform's final held-out "
                "accuracy of the same seed; speedup = uniform's rollouts to the target / the "
                "allocator's, mean and min-max over the seeds that reached it; 'one < x' bounds "
                "a seed that did not)",
                [
                    "allocator",
                    "reached",
                    "rollouts (M)",
                    "tokens (B)",
                    "speedup vs uniform",
                    "spread (min-max)",
                    "token speedup",
                    "steps to target",
                    "final acc (sd)",
                    "acc at uniform's rollouts",
                    "rollouts/step",
                    "trained share",
                    "zero-var groups",
                    "evicted",
                ],  # fmt: skip
                [
                    [
                        r["allocator"],
                        r["reached"],
                        fmt(r["rollouts_M"], ".3f"),
                        fmt(r["tokens_B"], ".3f"),
                        fmt(r["speedup"]),
                        fmt(r["spread"]),
                        fmt(r["tok_speedup"]),
                        fmt(r["steps"], ".0f"),
                        f"{r['final']:.4f} ({r['final_sd']:.4f})",
                        fmt(r["at_budget"], ".4f"),
                        fmt(r["rollouts_per_step"], ".0f"),
                        fmt(r["trained_share"]),
                        fmt(r["zero_var"]),
                        fmt(r["evicted"], ".0f"),
                    ]
                    for r in rows
                ],  # fmt: skip
            )
        )
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
    only = parser.parse_args(argv).only
    console = Console(width=220)
    kinds = [k for k in COMPARED if k in ALLOCATORS]
    missing = [k for k in COMPARED if k not in ALLOCATORS]
    started = time.perf_counter()
    decision: list[dict[str, Any]] = []
    throughput: list[dict[str, Any]] = []
    targets = []
    if only in (None, "decision"):
        console.print("[bold](a)[/] decision time ...")
        decision = bench_decision(sorted(ALLOCATORS))
    if only in (None, "throughput"):
        console.print("[bold](b)[/] sim throughput ...")
        throughput = bench_throughput()
    if only in (None, "target"):
        for name, budget, steps, knobs in SCENARIOS:
            console.print(f"[bold](c)[/] rollouts-to-target, {name} scenario ...")
            targets.append((name, budget, steps, knobs, bench_target(kinds, budget, steps, knobs)))
    elapsed = time.perf_counter() - started
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

    if only is not None:
        note = (
            f"{PARTS[only]} rerun alone: `python benchmarks/bench_core.py --only {only}` "
            f"({elapsed:.0f} s), {now}; the other tables are from the run above."
        )
        text = replace_part(OUT.read_text(), PARTS[only], [to_markdown(*t) for t in rendered], note)
        atomic_write_text(OUT, text)
        console.print(f"updated {PARTS[only]} in {OUT.relative_to(ROOT)} in {elapsed:.0f} s")
        return
    header = [
        "# Core benchmark (allocators on the sim backend)",
        "",
        f"Command: `python benchmarks/bench_core.py` ({elapsed:.0f} s). Written {now}.",
        f"Machine: {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs visible, "
        f"one thread; Python {platform.python_version()}, numpy {np.__version__}.",
        "",
        "Allocators use their default knobs"
        + "".join(f"; `{k}` with {v}" for k, v in OVERRIDES.items())
        + (f". Not registered at run time: {', '.join(missing)}." if missing else ".")
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
