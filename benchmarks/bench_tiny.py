"""Benchmarks of the tiny backend: per-step time split, allocators to target, quickstart wall time.

Three parts, each printing a Markdown table (and writing JSON next to ``--out``):

``timing``      per-step seconds of generate / allocate / update and per-evaluation seconds, at
                64 and 256 rollouts per step (uniform, n=8), wall and process CPU time.
``allocators``  the jobs of a spec (``--spec``, default ``experiments/tiny-allocators.yaml``;
                every allocator, or ``--allocators``, x ``--seeds`` seeds, plus the baseline at
                each learning rate of ``--lr-grid``) run through the real train loop
                (``rollcli.jobs.train.run_train_job``), ``--parallel`` niced processes at a time,
                each torch single-threaded, CPU seconds measured per job; then rollouts-to-target
                and tokens-to-target against the baseline at the spec's learning rate and against
                the best baseline of the grid, with final accuracy, generated and trained rollouts,
                and where every rollout went (``rollcli report``'s breakdown; ``<out>/breakdown-*.md``).
``quickstart``  wall time of ``rollcli run`` on a spec, with a fresh base-model cache (the
                one-time build included).

    python benchmarks/bench_tiny.py timing
    nice python benchmarks/bench_tiny.py allocators --seeds 5 --lr-grid 1e-4,2e-4,6e-4 --target 0.90
    nice python benchmarks/bench_tiny.py allocators --spec experiments/tiny-paper.yaml --seeds 5 \
        --lr-grid 1e-4,2e-4,6e-4 --target 0.93
    python benchmarks/bench_tiny.py allocators --allocators grpo --set budget.rollouts_per_step=128
    nice python benchmarks/bench_tiny.py allocators --spec experiments/zoo-tiny.yaml \
        --allocators grpo,spo --base-seeds 0-2 --seeds 5 --target 0.90   # three base models
    python benchmarks/bench_tiny.py quickstart --spec experiments/quickstart.yaml

Finished jobs are kept under ``<out>/jobs/<label>-s<seed>-<config hash>`` and reused by any later
call with the same settings (``--out`` is the cache; ``--cache`` is the base-model cache). The hash
is of the resolved configs (presets and defaults filled in): a changed preset or default reruns the
job, a code change that keeps every value does not (use a fresh ``--out`` then).

Targets: ``fixed`` (``--target``, an accuracy) and ``<baseline>-final`` (the mean final accuracy
of the baseline's seeds, the spec's ``at: final``). Crossings follow ``rollcli report``
(rollcli.analysis.stats): the first crossing of the *seed-mean* curve, linear between
evaluations; not reached is a bound (``>=``), never a number. Speedup = baseline rollouts /
allocator rollouts; 95 % intervals are ``rollcli report``'s paired seed bootstrap with expanded
percentiles (the ``-final`` target re-estimated in every resample), given only where ``rollcli
report`` gives one (5 units a side, 3 base models when they vary: ``too_few_for_interval``). "reached" counts the seeds
whose own curve crosses. The best baseline is the grid point with the fewest rollouts to the
first target (misses and ties: higher final accuracy).
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import itertools
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from rollcli.store.atomic import atomic_write_json, atomic_write_text, read_jsonl  # noqa: E402


# -- timing ---------------------------------------------------------------------------------------
class _Clock:
    """Accumulates wall and process-CPU seconds per phase (CPU is robust to a shared machine)."""

    def __init__(self) -> None:
        self.wall: dict[str, float] = {}
        self.cpu: dict[str, float] = {}

    def run(self, phase: str, fn: Any, *args: Any) -> Any:
        w, c = time.perf_counter(), time.process_time()
        out = fn(*args)
        self.wall[phase] = self.wall.get(phase, 0.0) + time.perf_counter() - w
        self.cpu[phase] = self.cpu.get(phase, 0.0) + time.process_time() - c
        return out


def bench_timing(steps: int, cache: str | None) -> list[dict[str, Any]]:
    """Drive the allocator protocol by hand, timing each phase in wall and CPU seconds."""
    from rollcli.allocators.registry import create_allocator
    from rollcli.backends.tiny import create_tiny_backend

    results = []
    for rps in (64, 256):
        backend = create_tiny_backend({"kind": "tiny", "cache_dir": cache}, seed=0)
        allocator = create_allocator(
            {"kind": "uniform", "n": 8},
            num_prompts=backend.num_prompts,
            rollouts_per_step=rps,
            seed=0,
        )
        clock = _Clock()
        evals = 0
        for step in range(steps):
            clock.run("allocate", allocator.start_step, step)
            while (ask := clock.run("allocate", allocator.ask)) is not None:
                outcomes = clock.run("generate", backend.generate, ask)
                clock.run("allocate", allocator.tell, outcomes)
            groups = clock.run("allocate", allocator.train_groups)
            clock.run("update", backend.update, groups)
            live = clock.run("allocate", allocator.live_refs)
            clock.run("update", backend.retain, live)
            if step % 10 == 0:
                clock.run("eval", backend.evaluate)
                evals += 1
        entry: dict[str, Any] = {"rollouts_per_step": rps, "steps": steps, "evals": evals}
        for kind, table in (("wall", clock.wall), ("cpu", clock.cpu)):
            for phase in ("generate", "allocate", "update"):
                entry[f"{kind}_{phase}_s"] = table.get(phase, 0.0) / steps
            entry[f"{kind}_step_s"] = sum(
                entry[f"{kind}_{p}_s"] for p in ("generate", "allocate", "update")
            )
            entry[f"{kind}_eval_s"] = table.get("eval", 0.0) / max(evals, 1)
        results.append(entry)
        backend.close()
    return results


def timing_table(results: list[dict[str, Any]]) -> str:
    lines = [
        "| rollouts/step | clock | generate s | allocate s | update s | step s (excl. eval) | eval s (each) |",
        "|---:|---|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        for kind in ("cpu", "wall"):
            lines.append(
                f"| {r['rollouts_per_step']} | {kind} | {r[f'{kind}_generate_s']:.4f} | "
                f"{r[f'{kind}_allocate_s']:.4f} | {r[f'{kind}_update_s']:.4f} | "
                f"{r[f'{kind}_step_s']:.4f} | {r[f'{kind}_eval_s']:.3f} |"
            )
    return "\n".join(lines)


# -- allocators -----------------------------------------------------------------------------------
def _set(config: dict[str, Any], dotted: str, value: Any) -> None:
    """``backend.lr=1e-4``-style override of a job config (the part before the first dot names
    the section: backend, budget, eval)."""
    section, _, key = dotted.partition(".")
    if section not in ("backend", "budget", "eval") or not key:
        raise SystemExit(f"--set {dotted}: expected backend.<knob>, budget.<knob> or eval.<knob>")
    config[section][key] = value


def _job_configs(
    spec_path: Path,
    seeds: list[int],
    cache: str | None,
    *,
    only: list[str] | None = None,
    overrides: list[tuple[str, Any]] = (),
    lr_grid: list[float] = (),
    baseline: str = "grpo",
    base_seeds: list[int] | None = None,
) -> list[dict[str, Any]]:
    """One train-job config per (label, base model, seed): the spec's allocators (or ``only`` of
    them), plus the baseline at every learning rate of ``lr_grid`` (labels
    ``<baseline>@lr=<lr>``); ``base_seeds`` sets ``backend.base_seed`` (None: the spec's)."""
    spec = yaml.safe_load(spec_path.read_text())
    allocators = dict(spec["allocators"])
    unknown = sorted(set(only or []) - set(allocators))
    if unknown:
        raise SystemExit(f"--allocators: {unknown} not in {spec_path} (has {sorted(allocators)})")
    variants: list[tuple[str, str, dict[str, Any]]] = [
        (name, name, {}) for name in allocators if not only or name in only
    ]
    variants += [(f"{baseline}@lr={lr:g}", baseline, {"lr": lr}) for lr in lr_grid]
    jobs = []
    bases: list[int | None] = list(base_seeds) if base_seeds else [None]
    for (label, name, backend_extra), base_seed, seed in itertools.product(variants, bases, seeds):
        job = {
            "experiment": "bench-tiny",
            "job": {"id": label, "type": "train", "allocator": label, "seed": seed},
            "backend": dict(spec["backend"]),
            "allocator": dict(allocators[name]),
            "budget": dict(spec["budget"]),
            "eval": dict(spec.get("eval") or {"every": 10}),
            "checkpoint": {"every": 10},
        }
        for key, value in overrides:
            _set(job, key, value)
        job["backend"].update(backend_extra)
        if base_seed is not None:
            job["backend"]["base_seed"] = base_seed
        if cache:
            job["backend"]["cache_dir"] = cache
        jobs.append(job)
    return jobs


def _job_key(job: dict[str, Any]) -> str:
    """Content hash of what determines a job's results: the backend and allocator configs as the
    code resolves them (presets and defaults filled in, so a job whose preset or default values
    changed runs anew), the budget, evaluation and seed; not the base-model cache folder. A code
    change that keeps every config value needs a fresh ``--out``."""
    from rollcli.allocators.registry import create_config
    from rollcli.backends.tiny.backend import config_from_mapping

    backend = dataclasses.asdict(config_from_mapping(job["backend"]))
    backend.pop("cache_dir", None)
    payload = {
        "backend": backend,
        "allocator": dataclasses.asdict(create_config(job["allocator"])),
        "budget": job["budget"],
        "eval": job["eval"],
        "seed": job["job"]["seed"],
    }
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()[:12]


_CHILD = (
    "import json, sys, time\n"
    "from rollcli.jobs.train import run_train_job\n"
    "cpu = time.process_time()\n"
    "run_train_job(sys.argv[1])\n"
    "cpu = time.process_time() - cpu\n"
    "open(sys.argv[1] + '/bench_cpu.json', 'w').write(json.dumps({'cpu_s': cpu}))\n"
)


def _run_job(job_dir: Path) -> None:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    with (job_dir / "bench.log").open("w") as log:
        subprocess.run(
            ["nice", "-n", "10", sys.executable, "-c", _CHILD, str(job_dir)],
            check=True,
            env=env,
            stderr=log,
            stdout=log,
        )


def _finished(job_dir: Path, steps: int) -> bool:
    rows = read_jsonl(job_dir / "metrics.jsonl") if (job_dir / "metrics.jsonl").exists() else []
    return bool(rows) and rows[-1].get("step") == steps and (job_dir / "bench_cpu.json").exists()


def run_allocators(jobs: list[dict[str, Any]], out: Path, parallel: int) -> dict[str, list[dict]]:
    """Run (or reuse from ``out/jobs``) every job; ``{label: [per-seed result, ...]}``.

    A job folder is named by the content hash of its config, so a later call with the same
    settings (another table, a grid that contains the default) reuses finished jobs.
    """
    from rollcli.backends.tiny import create_tiny_backend

    dirs, todo = [], []
    for job in jobs:
        d = out / "jobs" / f"{job['job']['id']}-s{job['job']['seed']}-{_job_key(job)}"
        d.mkdir(parents=True, exist_ok=True)
        dirs.append(d)
        if not _finished(d, int(job["budget"]["steps"])):
            (d / "config.yaml").write_text(yaml.safe_dump(job))
            todo.append(d)
    print(f"{len(jobs)} jobs: {len(jobs) - len(todo)} cached, {len(todo)} to run", flush=True)
    if todo:
        # build each base model up front (not in two job processes at once)
        for backend in {j["backend"].get("base_seed"): j["backend"] for j in jobs}.values():
            create_tiny_backend(backend, seed=0).close()
        with ThreadPoolExecutor(parallel) as pool:
            list(pool.map(_run_job, todo))
    results: dict[str, list[dict]] = {}
    for job, d in zip(jobs, dirs, strict=True):
        results.setdefault(job["job"]["id"], []).append(
            {
                "seed": job["job"]["seed"],
                "base_seed": job["backend"].get("base_seed"),
                "rows": read_jsonl(d / "metrics.jsonl"),
                "cpu_s": json.loads((d / "bench_cpu.json").read_text())["cpu_s"],
                "dir": str(d),
            }
        )
    return results


def _unit(run: dict[str, Any], runs: list[dict[str, Any]]) -> Any:
    """A job's unit of the bootstrap: its seed, or (base model, seed) when ``runs`` span several
    base models (then intervals resample base models, then seeds within them)."""
    if len({r.get("base_seed") for r in runs}) > 1:
        return (run["base_seed"], run["seed"])
    return run["seed"]


def _curves(runs: list[dict], axis: str) -> Any:
    from rollcli.analysis.stats import SeedCurves

    key = {"rollouts": "cum_rollouts", "tokens": "cum_tokens"}[axis]
    curves = {}
    for run in runs:
        ev = [r for r in run["rows"] if "eval/accuracy" in r]
        curves[_unit(run, runs)] = (
            np.array([r["step"] for r in ev], int),
            np.array([r[key] for r in ev], float),
            np.array([r["eval/accuracy"] for r in ev], float),
        )
    return SeedCurves.build(curves)


def _mean_crossing(curves: Any, target: float) -> Any:
    """Where the seed-mean curve first reaches ``target`` (rollcli.analysis's rule), as Bounded."""
    from rollcli.analysis.curves import Bounded
    from rollcli.analysis.stats import crossings

    at, reached = crossings(*curves.mean_curves(curves.all_seeds()), np.array([target]))
    return Bounded(float(at[0]), "exact" if reached[0] else "lower")


def _speedup(base: dict[str, Any], alloc: dict[str, Any], target: Any, fixed: bool) -> dict:
    """Speedup of ``alloc`` over ``base`` on rollouts and tokens with 95 % bootstrap intervals.

    ``target`` is a number (``fixed``) or the baseline's final accuracy, which every resample
    re-estimates from the baseline seeds it drew (as ``rollcli report`` does).
    """
    from rollcli.analysis.analyze import too_few_for_interval
    from rollcli.analysis.stats import bootstrap_speedups, ratio

    value = target if fixed else float(base["rollouts"].finals.mean())
    targets = (
        (lambda idx: np.full(idx.shape[0], value))
        if fixed
        else (lambda idx: base["rollouts"].finals[idx].mean(axis=1))
    )
    intervals = (
        dict.fromkeys(("rollouts", "tokens"))
        if too_few_for_interval(base["rollouts"].seeds, alloc["rollouts"].seeds)
        else bootstrap_speedups(base, alloc, targets)
    )
    return {
        axis: {
            "speedup": ratio(
                _mean_crossing(base[axis], value), _mean_crossing(alloc[axis], value)
            ).to_json(),
            "ci95": intervals[axis],
        }
        for axis in ("rollouts", "tokens")
    }


def analyse(
    results: dict[str, list[dict]], baseline: str, fixed_target: float | None
) -> dict[str, Any]:
    """Every label's curves, crossings and speedups against the default and the best-lr baseline.

    Targets: ``fixed`` (``--target``) and ``<baseline>-final`` (the default baseline's mean final
    accuracy). The best baseline is the ``<baseline>@lr=`` run (or the default one) with the
    fewest rollouts to the fixed target on its seed-mean curve, ties and misses broken by the
    higher final accuracy; speedups against it use the same target values.
    """
    from rollcli.analysis.curves import first_crossing

    curves = {
        label: {axis: _curves(runs, axis) for axis in ("rollouts", "tokens")}
        for label, runs in results.items()
    }
    base = curves[baseline]
    targets: dict[str, float] = {f"{baseline}-final": float(base["rollouts"].finals.mean())}
    if fixed_target is not None:
        targets = {"fixed": fixed_target, **targets}
    grid = [lab for lab in results if lab == baseline or lab.startswith(f"{baseline}@lr=")]
    rank_target = targets.get("fixed", targets[f"{baseline}-final"])

    def rank(label: str) -> tuple[float, float]:
        hit = _mean_crossing(curves[label]["rollouts"], rank_target)
        return (
            hit.value if hit.exact else math.inf,
            -float(curves[label]["rollouts"].finals.mean()),
        )

    best = min(grid, key=rank)
    table: dict[str, Any] = {"targets": targets, "baseline": baseline, "best_baseline": best}
    entries: dict[str, Any] = {}
    for label, runs in results.items():
        rows = [r["rows"] for r in runs]
        finals = curves[label]["rollouts"].finals
        steps = [len(r) - 1 for r in rows]
        entry: dict[str, Any] = {
            "seeds": len(runs),
            "base_models": len({r.get("base_seed") for r in runs}),
            "final_accuracy_mean": float(finals.mean()),
            "final_accuracy_std": float(finals.std()),
            "generated_rollouts_mean": float(np.mean([r[-1]["cum_rollouts"] for r in rows])),
            "trained_rollouts_mean": float(
                np.mean([sum(x.get("rollouts_trained", 0) for x in r[1:]) for r in rows])
            ),
            "cpu_s_mean": float(np.mean([r["cpu_s"] for r in runs])),
            "zero_var_frac_first10": float(
                np.mean([np.mean([x["zero_var_frac"] for x in r[1:11]]) for r in rows])
            ),
            "zero_var_frac_last10": float(
                np.mean([np.mean([x["zero_var_frac"] for x in r[1:][-10:]]) for r in rows])
            ),
            "evicted_final": float(np.mean([r[-1].get("evicted", 0) for r in rows])),
            "accuracy_at_step": {},
            "targets": {},
        }
        eval_steps = curves[label]["rollouts"].steps
        for frac in (1 / 3, 2 / 3, 1.0):  # the first evaluation at or after each fraction
            step = int(eval_steps[np.searchsorted(eval_steps, frac * min(steps) - 1e-9)])
            at = [next(x["eval/accuracy"] for x in r if x["step"] == step) for r in rows]
            entry["accuracy_at_step"][step] = float(np.mean(at))
        for tname, target in targets.items():
            fixed = tname == "fixed"
            per_seed = [
                first_crossing(
                    np.array([x["cum_rollouts"] for x in r if "eval/accuracy" in x], float),
                    np.array([x["eval/accuracy"] for x in r if "eval/accuracy" in x], float),
                    target,
                ).exact
                for r in rows
            ]
            entry["targets"][tname] = {
                "reached": f"{sum(per_seed)}/{len(per_seed)}",
                "rollouts": _mean_crossing(curves[label]["rollouts"], target).to_json("{:,.0f}"),
                "tokens": _mean_crossing(curves[label]["tokens"], target).to_json("{:,.0f}"),
                "vs_default": _speedup(base, curves[label], target, fixed=fixed),
                # against a best baseline other than the default, the target is held at the
                # default's value (a number): re-estimating it from another run's seeds would
                # mix two baselines in one resample
                "vs_best": None
                if best == baseline
                else _speedup(curves[best], curves[label], target, fixed=True),
            }
        entries[label] = entry
    table["allocators"] = entries
    return table


def _fmt_speedup(result: dict[str, Any], is_base: bool = False) -> str:
    if is_base:
        return "1.00x (baseline)"
    ci = result["ci95"]
    text = result["speedup"]["display"]
    text = text if text.startswith(("n/a", ">", "<")) else f"{text}x"
    return f"{text} [{ci[0]:.2f}, {ci[1]:.2f}]" if ci else text


def allocator_table(table: dict[str, Any]) -> str:
    """Markdown: one table per target, the lr grid, per-step accuracy and zero-variance share."""
    base, best = table["baseline"], table["best_baseline"]
    out = [f"Best baseline learning rate: `{best}` (fewest rollouts to the first target)."]
    first = next(iter(table["allocators"].values()))
    if first.get("base_models", 1) > 1:
        out.append(
            f"Units: {first['base_models']} base models x "
            f"{first['seeds'] // first['base_models']} seeds; intervals from the two-level "
            "bootstrap (base models, then seeds within them: docs/report.md)."
        )
    if best == base:
        out[0] += " It is the default, so both speedup columns are the same numbers."
    for tname, target in table["targets"].items():
        out.append(f"\nTarget `{tname}` = accuracy {target:.3f}\n")
        out.append(
            f"| allocator | reached | rollouts to target | speedup vs {base} [95% CI] | "
            f"vs best {best} [95% CI] | token speedup vs {base} [95% CI] | final accuracy | "
            "generated rollouts | trained rollouts | CPU s/job |"
        )
        out.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        for n, e in table["allocators"].items():
            t = e["targets"][tname]
            out.append(
                f"| {n} | {t['reached']} | {t['rollouts']['display']} | "
                f"{_fmt_speedup(t['vs_default']['rollouts'], n == base)} | "
                f"{_fmt_speedup((t['vs_best'] or t['vs_default'])['rollouts'], n == best)} | "
                f"{_fmt_speedup(t['vs_default']['tokens'], n == base)} | "
                f"{e['final_accuracy_mean']:.3f} ± {e['final_accuracy_std']:.3f} | "
                f"{e['generated_rollouts_mean']:,.0f} | {e['trained_rollouts_mean']:,.0f} | "
                f"{e['cpu_s_mean']:.0f} |"
            )
    steps = list(next(iter(table["allocators"].values()))["accuracy_at_step"])
    out.append(
        "\n| allocator | "
        + " | ".join(f"accuracy at step {s}" for s in steps)
        + " | zero-variance share, steps 1-10 | last 10 steps | prompts evicted by the end |"
    )
    out.append("|---|" + "---:|" * (len(steps) + 3))
    for n, e in table["allocators"].items():
        cells = " | ".join(f"{e['accuracy_at_step'][s]:.3f}" for s in steps)
        out.append(
            f"| {n} | {cells} | {e['zero_var_frac_first10']:.2f} | {e['zero_var_frac_last10']:.2f} | "
            f"{e['evicted_final']:,.0f} |"
        )
    return "\n".join(out)


def breakdown_markdown(results: dict[str, list[dict]]) -> str:
    """Where every rollout went, per label: ``rollcli report``'s breakdown tables (seed means of
    the jobs whose rows carry the breakdown columns; older cached jobs are counted as left out)."""
    from rollcli.analysis.breakdown import render_breakdown_markdown, run_breakdown
    from rollcli.analysis.load import JobMetrics, RunData

    jobs = [
        JobMetrics(
            f"{label}-b{r.get('base_seed')}-s{r['seed']}", label, r["seed"], "done", rows=r["rows"]
        )
        for label, runs in results.items()
        for r in runs
    ]
    run = RunData(Path("."), "bench-tiny", list(results), {}, None, jobs, {})
    rows = run_breakdown(run)
    missing = [label for label in results if label not in {b.allocator for b in rows}]
    text = render_breakdown_markdown(rows, level=3)
    return text + (
        f"No breakdown columns in any job (older rows): {', '.join(missing)}.\n" if missing else ""
    )


# -- quickstart -----------------------------------------------------------------------------------
def bench_quickstart(spec: Path) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "ROLLCLI_CACHE": str(Path(tmp) / "cache")}
        shutil.copy(spec, Path(tmp) / spec.name)
        start, cpu0 = time.perf_counter(), os.times()
        proc = subprocess.run(
            [sys.executable, "-c", "from rollcli.cli.app import main; main()", "run", spec.name],
            cwd=tmp,
            env=env,
            capture_output=True,
            text=True,
        )
        wall = time.perf_counter() - start
        cpu1 = os.times()
        child_cpu = (cpu1.children_user - cpu0.children_user) + (
            cpu1.children_system - cpu0.children_system
        )
    return {
        "spec": str(spec),
        "returncode": proc.returncode,
        "wall_s": wall,
        "child_cpu_s": child_cpu,
        "tail": proc.stdout[-3000:] + proc.stderr[-2000:],
    }


def _parse_value(text: str) -> Any:
    """An override's value: int, then float (YAML 1.1 reads ``1e-4`` as a string), then YAML."""
    for cast in (int, float):
        try:
            return cast(text)
        except ValueError:
            pass
    return yaml.safe_load(text)


def _slug(text: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "-" for c in text)[:120]


def seed_list(count: int, listed: str, option: str = "--seed-list") -> list[int]:
    """The seeds to run: ``listed`` (``"8,9,10"`` or ``"8-12"``, comma-separated parts) if given,
    else ``0..count-1``; a hold-out check runs seeds never looked at without re-running the others.
    ``option`` names the flag in errors."""
    if not listed:
        return list(range(count))
    seeds: list[int] = []
    for part in listed.split(","):
        lo, dash, hi = part.strip().partition("-")
        try:
            block = list(range(int(lo), int(hi) + 1)) if dash else [int(lo)]
        except ValueError:
            raise SystemExit(f"{option} {listed}: {part!r} is not a seed or a range a-b") from None
        if not block:
            raise SystemExit(f"{option} {listed}: the range {part!r} is empty")
        seeds.extend(block)
    if len(set(seeds)) != len(seeds) or min(seeds) < 0:
        raise SystemExit(f"{option} {listed}: seeds must be distinct and non-negative")
    return seeds


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("part", choices=["timing", "allocators", "quickstart"])
    parser.add_argument("--spec", type=Path, default=REPO / "experiments" / "tiny-allocators.yaml")
    parser.add_argument("--seeds", type=int, default=5, help="run seeds 0..SEEDS-1")
    parser.add_argument(
        "--seed-list",
        default="",
        help="allocators: these seeds instead of --seeds, e.g. 8-12 or 8,9,10 (a hold-out)",
    )
    parser.add_argument(
        "--base-seeds",
        default="",
        help="allocators: run every job on these base models (backend.base_seed), e.g. 0-2; "
        "intervals then resample base models and seeds (default: the spec's one)",
    )
    parser.add_argument("--parallel", type=int, default=2)
    parser.add_argument("--steps", type=int, default=30, help="timing: steps per setting")
    parser.add_argument(
        "--target", type=float, default=None, help="allocators: a fixed accuracy target"
    )
    parser.add_argument("--baseline", default="grpo", help="allocators: the baseline's name")
    parser.add_argument(
        "--allocators", default=None, help="allocators: comma-separated names (default: all)"
    )
    parser.add_argument(
        "--lr-grid",
        default="",
        help="allocators: extra learning rates for the baseline, e.g. 1e-4,5e-4",
    )
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="SECTION.KNOB=VALUE",
        help="allocators: override a job setting (backend., budget., eval.); repeatable",
    )
    parser.add_argument("--cache", default=None, help="base-model cache dir (default: the usual)")
    parser.add_argument(
        "--out",
        type=Path,
        default=Path(tempfile.gettempdir()) / "bench-tiny",
        help="output folder; finished jobs under <out>/jobs are reused",
    )
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    if args.part == "timing":
        import torch

        torch.set_num_threads(1)
        results = bench_timing(args.steps, args.cache)
        atomic_write_json(args.out / "timing.json", results)
        print(timing_table(results))
    elif args.part == "allocators":
        overrides = []
        for item in args.set:
            key, sep, value = item.partition("=")
            if not sep:
                raise SystemExit(f"--set {item}: expected SECTION.KNOB=VALUE")
            overrides.append((key, _parse_value(value)))
        jobs = _job_configs(
            args.spec,
            seed_list(args.seeds, args.seed_list),
            args.cache,
            only=args.allocators.split(",") if args.allocators else None,
            overrides=overrides,
            lr_grid=[float(x) for x in args.lr_grid.split(",") if x],
            baseline=args.baseline,
            base_seeds=seed_list(0, args.base_seeds, "--base-seeds") if args.base_seeds else None,
        )
        cpu0 = os.times()
        results = run_allocators(jobs, args.out, args.parallel)
        cpu1 = os.times()
        table = analyse(results, args.baseline, args.target)
        table["command"] = " ".join(sys.argv)
        table["children_cpu_s"] = (cpu1.children_user - cpu0.children_user) + (
            cpu1.children_system - cpu0.children_system
        )
        stem = args.spec.stem + "".join(f"_{x}" for x in args.set)
        atomic_write_json(args.out / f"allocators-{_slug(stem)}.json", table)
        print(allocator_table(table))
        breakdown = breakdown_markdown(results)
        atomic_write_text(args.out / f"breakdown-{_slug(stem)}.md", breakdown)
        print("\n" + breakdown)
        print(f"\nchild CPU this call: {table['children_cpu_s']:.0f} s")
    else:
        result = bench_quickstart(args.spec)
        atomic_write_json(args.out / "quickstart.json", result)
        print(
            f"wall {result['wall_s']:.1f} s, child CPU {result['child_cpu_s']:.1f} s, rc {result['returncode']}"
        )
        print(result["tail"])


if __name__ == "__main__":
    main()
