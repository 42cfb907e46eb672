"""Why the budget-aware oracle loses at low sim noise: a seed check and a per-step trace.

``compare`` re-runs bench_zoo's rollouts-to-target table (bench_core's part (c): the same job
configs, overrides, target and bootstrap) at one noise level with more seeds. ``trace`` runs
allocators through the train loop and summarises, per window of steps, what each does and what
its updates do to the policy: prompts and rollouts per prompt, informative groups, the true
signal bought, the mini-batch noise scale, Adam's effective step (``|dθ| / lr`` per optimiser
step) and the held-out accuracy. ``--backend k=v`` changes sim knobs for a counterfactual
(exploratory; the testbed's defaults are not touched).

    nice -n 10 python benchmarks/oracle_why.py compare --noise 5 --seeds 10 --cache DIR
    nice -n 10 python benchmarks/oracle_why.py trace --noise 5,10 --seeds 3 [--backend adam_beta2=0.99]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_core import BUDGET, STEPS, allocator_config, to_markdown  # noqa: E402
from sim_targets import Scenario, TargetPlan, job_config, run_all, target_tables  # noqa: E402

KINDS = ["uniform", "oracle", "bayes_budget", "spo", "knapsack"]
WINDOWS = [(1, 10), (11, 50), (51, 100), (101, 200)]


def compare(
    kinds: list[str], noise: float, seeds: int, cache: Path | None, jobs: int, backend: dict
) -> str:
    """bench_zoo's table at one noise level, ``seeds`` seeds (the same cache keys as bench_zoo)."""
    knobs = {"score_noise": noise, "lr": 0.003, **backend}
    main = Scenario(f"score_noise={noise:g}", BUDGET, STEPS, knobs)
    plan = TargetPlan(kinds=kinds, allocators={k: allocator_config(k) for k in kinds},
                      seeds=list(range(seeds)), main=main, noise_levels=[noise],
                      lr_grid=[0.003])  # fmt: skip
    planned = plan.runs()
    results = run_all([c for _, c in planned], jobs=jobs, cache=cache)
    tables, _ = target_tables(plan, dict(zip([k for k, _ in planned], results, strict=True)))
    return to_markdown(*tables[0])


def trace_run(config: dict[str, Any]) -> dict[str, np.ndarray]:
    """One run's per-step series (index 0: before training for ``acc``/``theta``)."""
    from rollcli.jobs.train import create_job_loop

    loop = create_job_loop(config)
    backend = loop.backend
    rows = []
    theta = [float(np.mean(backend.theta))]
    rms = []  # Adam's normaliser sqrt(v_hat): a diagnostic read of the backend's optimiser state
    acc = [float(loop.initial_row()["eval/accuracy"])]
    while not loop.done:
        row = loop.run_step()
        rows.append(row)
        theta.append(float(np.mean(backend.theta)))
        b2 = backend.config.adam_beta2
        rms.append(float(np.sqrt(np.mean(backend._v) / (1 - b2**backend._t))))
        acc.append(float(row["eval/accuracy"]))
    p = np.asarray(backend.success_probabilities(np.arange(backend.config.num_train_prompts)))

    def col(key: str) -> np.ndarray:
        return np.array([float(r.get(key, np.nan)) for r in rows])

    prompts = col("prompts_trained")
    return {
        "prompts": prompts,
        "per_prompt": col("rollouts_trained") / np.maximum(prompts, 1),
        "informative": col("groups_informative"),
        "true_signal": col("train/true_signal"),
        "signal_norm": col("train/signal_norm"),
        "noise_scale": col("train/noise_scale"),
        "adam_rms": np.array(rms),
        "adam_step": np.abs(np.diff(theta)) / (backend.config.lr * col("train/optimizer_steps")),
        "acc": np.array(acc),
        "learnable_end": np.array([float(np.mean((p > 0.2) & (p < 0.8)))]),
    }


def trace(kinds: list[str], noises: list[float], seeds: int, backend: dict[str, Any]) -> str:
    """Per-window means over seeds of each allocator's series, one table per noise level."""
    out = []
    for noise in noises:
        sc = Scenario("t", BUDGET, STEPS, {"score_noise": noise, "lr": 0.003, **backend})
        header = ["allocator", "steps", "prompts/step", "rollouts/prompt", "informative groups",
                  "true signal", "signal/opt step", "noise scale", "Adam sqrt(v)", "Adam step / lr",
                  "acc at window end"]  # fmt: skip
        rows = []
        for kind in kinds:
            runs = [
                trace_run(job_config(kind, allocator_config(kind), s, sc)) for s in range(seeds)
            ]
            for lo, hi in WINDOWS:
                part = slice(lo - 1, hi)
                mean = {k: float(np.nanmean([np.nanmean(r[k][part]) for r in runs]))
                        for k in runs[0] if k not in ("acc", "learnable_end")}  # fmt: skip
                acc = float(np.mean([r["acc"][hi] for r in runs]))
                rows.append([kind, f"{lo}-{hi}", f"{mean['prompts']:.0f}",
                             f"{mean['per_prompt']:.1f}", f"{mean['informative']:.0f}",
                             f"{mean['true_signal']:.1f}", f"{mean['signal_norm']:.3f}",
                             f"{mean['noise_scale']:.2f}", f"{mean['adam_rms']:.3f}",
                             f"{mean['adam_step']:.3f}",
                             f"{acc:.4f}"])  # fmt: skip
            learnable = float(np.mean([r["learnable_end"][0] for r in runs]))
            rows.append([kind, "end", "", "", "", "", "", "", "", "",
                         f"pool share 0.2<p<0.8: {learnable:.3f}"])  # fmt: skip
        extra = f", {json.dumps(backend)}" if backend else ""
        out.append(to_markdown(f"score_noise {noise:g}{extra}, seeds 0-{seeds - 1}", header, rows))
    return "\n".join(out)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("part", choices=["compare", "trace"])
    parser.add_argument("--kinds", default=",".join(KINDS))
    parser.add_argument("--noise", default="5", help="score_noise level(s), comma-separated")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--cache", type=Path)
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--backend", action="append", default=[], help="sim knob k=v (repeatable)")
    args = parser.parse_args(argv)
    kinds = args.kinds.split(",")
    noises = [float(x) for x in args.noise.split(",")]
    started = time.process_time()
    knobs = {k: json.loads(v) for k, v in (kv.split("=", 1) for kv in args.backend)}
    if args.part == "compare":
        print(compare(kinds, noises[0], args.seeds, args.cache, args.jobs, knobs))
    else:
        print(trace(kinds, noises, args.seeds, knobs))
    print(f"({time.process_time() - started:.0f} s CPU in this process)")


if __name__ == "__main__":
    sys.exit(main())
