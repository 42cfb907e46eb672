"""Calibrate the sim's default scenario on the uniform (GRPO) baseline alone.

Run ``python benchmarks/calibrate_sim.py [--grid] [--seeds 0 1]``. Only ``uniform`` runs: the
defaults of :class:`rollcli.backends.sim.SimConfig` are chosen from these numbers before any
other allocator runs on them (docs/LOG.md holds the pre-registration). For each setting it
reports, as means over the seeds:

- held-out accuracy at step 0 and at the last step (anchor: 0.39 -> ~0.55, docs/sim.md);
- the zero-variance share of uniform's generated groups over the first 5 and the last 10
  steps (anchors, REFERENCE §2b: it must rise as prompts are learned; Knapsack RL: only ~20 %
  of prompts still give a gradient by step 1000);
- GRESO's persistence numbers, per epoch ``e >= 1``: the share of epoch ``e``'s zero-variance
  prompts that were zero-variance in epoch ``e - 1`` (GRESO: > 90 %), and the share of
  epoch ``e - 1``'s zero-variance prompts that are informative in epoch ``e`` (GRESO: ~20 %);
- ``noise_scale`` (``B_noise`` over the mini-batch's rollouts, per optimiser step) over the
  first 5 and the last 10 steps.

``--grid`` runs the calibration grid (``GRID``, or the one given as ``--grid lr=0.002,0.004
prompt_lr=0.1``) and prints one row per setting; without it only the defaults run (``--set``
changes knobs for every run). It writes nothing; docs/LOG.md quotes its output.
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse  # noqa: E402
import itertools  # noqa: E402
import time  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402
from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from rollcli.jobs.train import create_job_loop  # noqa: E402

BUDGET = 4096
STEPS = 200
# knob -> values; every combination runs (uniform only)
GRID: dict[str, list[Any]] = {
    "lr": [0.001, 0.002, 0.004],
    "prompt_lr": [0.03, 0.1, 0.3],
    "prompt_noise": [0.0, 1.0, 3.0],
}


def run_uniform(
    backend: dict[str, Any], seed: int, steps: int = STEPS, budget: int = BUDGET
) -> dict[str, float]:
    """One uniform run; its calibration numbers (module docstring)."""
    config = {
        "job": {"id": f"cal-{seed}", "type": "train", "allocator": "uniform", "seed": seed},
        "backend": {"kind": "sim", **backend},
        "allocator": {"kind": "uniform", "n": 8},
        "budget": {"steps": steps, "rollouts_per_step": budget},
        "eval": {"every": steps},
    }
    loop = create_job_loop(config)
    flat_by_epoch: dict[int, dict[int, bool]] = {}
    generate = loop.backend.generate

    def recording(ask: Any) -> Any:
        outcomes = generate(ask)
        epoch = loop.allocator.source.epoch
        seen = flat_by_epoch.setdefault(epoch, {})
        for o in outcomes:
            seen[o.prompt_id] = bool(np.ptp(o.rewards) == 0)
        return outcomes

    loop.backend.generate = recording  # type: ignore[method-assign]
    first = loop.initial_row()
    rows = [loop.run_step() for _ in range(steps)]
    persist, revive = [], []
    epochs = sorted(flat_by_epoch)
    for prev, cur in itertools.pairwise(epochs):
        a, b = flat_by_epoch[prev], flat_by_epoch[cur]
        both = [i for i in b if i in a]
        flat_now = [i for i in both if b[i]]
        flat_before = [i for i in both if a[i]]
        if flat_now:
            persist.append(np.mean([a[i] for i in flat_now]))
        if flat_before:
            revive.append(np.mean([not b[i] for i in flat_before]))
    zero_var = np.array([r["zero_var_frac"] for r in rows])
    scale = np.array([r.get("train/noise_scale", np.nan) for r in rows])
    return {
        "acc0": first["eval/accuracy"],
        "acc": rows[-1]["eval/accuracy"],
        "pool": rows[-1]["eval/pool_accuracy"],
        "zv_start": float(zero_var[:5].mean()),
        "zv_end": float(zero_var[-10:].mean()),
        # nan when the run never sees a prompt twice (a pool larger than the run)
        "persist": float(np.mean(persist)) if persist else float("nan"),
        "revive": float(np.mean(revive)) if revive else float("nan"),
        "ns_start": float(np.nanmean(scale[:5])),
        "ns_end": float(np.nanmean(scale[-10:])),
    }


def _number(text: str) -> float | int | str:
    """A knob value: int, float, or a word (``difficulty_dist=beta``)."""
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--grid", nargs="*", metavar="KNOB=V1,V2", help="run a grid of settings")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    parser.add_argument("--steps", type=int, default=STEPS, help="rollout steps per run")
    parser.add_argument("--budget", type=int, default=BUDGET, help="rollouts per step")
    parser.add_argument("--set", nargs="*", default=[], metavar="KNOB=VALUE",
                        help="sim knobs for every run (e.g. score_noise=10)")  # fmt: skip
    args = parser.parse_args(argv)
    fixed = {k: _number(v) for k, v in (item.split("=", 1) for item in args.set)}
    grid = GRID
    if args.grid:
        grid = {k: [_number(x) for x in v.split(",")]
                for k, v in (item.split("=", 1) for item in args.grid)}  # fmt: skip
    settings = [{}]
    if args.grid is not None:
        settings = [
            dict(zip(grid, values, strict=True)) for values in itertools.product(*grid.values())
        ]
    columns = ["acc0", "acc", "pool", "zv_start", "zv_end", "persist", "revive", "ns_start",
               "ns_end"]  # fmt: skip
    table = Table(title=f"uniform only, {args.budget} rollouts/step, {args.steps} steps, "
                  f"seeds {args.seeds}, "
                  f"fixed {fixed or 'defaults'}", title_justify="left")  # fmt: skip
    for name in [*(grid if args.grid is not None else []), *columns]:
        table.add_column(name)
    started = time.process_time()
    for knobs in settings:
        runs = [run_uniform({**fixed, **knobs}, s, args.steps, args.budget) for s in args.seeds]
        means = {c: float(np.mean([r[c] for r in runs])) for c in columns}
        table.add_row(*[str(knobs[k]) for k in knobs], *[f"{means[c]:.3f}" for c in columns])
    Console(width=200).print(table)
    print(f"{time.process_time() - started:.0f} CPU s")


if __name__ == "__main__":
    main()
