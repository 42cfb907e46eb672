"""Benchmarks of the tiny backend: per-step time split, allocators to target, quickstart wall time.

Three parts, each printing a Markdown table (and writing JSON next to ``--out``):

``timing``      per-step seconds of generate / allocate / update and per-evaluation seconds, at
                64 and 256 rollouts per step (uniform, n=8), wall and process CPU time.
``allocators``  the jobs of ``experiments/tiny-allocators.yaml`` (every allocator x ``--seeds``
                seeds) run through the real train loop (``rollcli.jobs.train.run_train_job``), two
                processes at a time, each torch single-threaded; then rollouts-to-target and
                tokens-to-target against GRPO, with the final accuracy beside each speedup.
``quickstart``  wall time of ``rollcli run`` on a spec, with a fresh base-model cache (the
                one-time build included).

    python benchmarks/bench_tiny.py timing
    nice python benchmarks/bench_tiny.py allocators --seeds 5 --out /tmp/bench-tiny
    python benchmarks/bench_tiny.py quickstart --spec experiments/quickstart.yaml

Targets: ``fixed`` (an accuracy every allocator reaches, ``--target``) and ``grpo-final`` (the
mean final accuracy of the GRPO seeds, the spec's ``at: final``). A crossing is interpolated
linearly between evaluations; a seed that never crosses is "not reached" and left out of the mean
(the table says how many reached); a speedup needs a majority of seeds of both allocators to
reach the target, else it is nan. Speedup = GRPO's mean / the allocator's mean, with a 90 %
bootstrap interval over seeds.
"""

from __future__ import annotations

import argparse
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

from rollcli.store.atomic import atomic_write_json, read_jsonl  # noqa: E402


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
def _job_configs(spec_path: Path, seeds: list[int], cache: str | None) -> list[dict[str, Any]]:
    spec = yaml.safe_load(spec_path.read_text())
    backend = dict(spec["backend"])
    if cache:
        backend["cache_dir"] = cache
    jobs = []
    for name, alloc in spec["allocators"].items():
        for seed in seeds:
            jobs.append(
                {
                    "experiment": "bench-tiny",
                    "job": {
                        "id": f"{name}-{seed}",
                        "type": "train",
                        "allocator": name,
                        "seed": seed,
                    },
                    "backend": backend,
                    "allocator": dict(alloc),
                    "budget": dict(spec["budget"]),
                    "eval": dict(spec.get("eval") or {"every": 10}),
                    "checkpoint": {"every": 1},
                }
            )
    return jobs


def _run_job(job_dir: Path) -> float:
    start = time.perf_counter()
    code = "import sys; from rollcli.jobs.train import run_train_job; run_train_job(sys.argv[1])"
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    log = (job_dir / "bench.log").open("w")
    subprocess.run(
        [sys.executable, "-c", code, str(job_dir)], check=True, env=env, stderr=log, stdout=log
    )
    return time.perf_counter() - start


def run_allocators(
    spec: Path, seeds: list[int], out: Path, parallel: int, cache: str | None
) -> dict:
    from rollcli.backends.tiny import create_tiny_backend

    jobs = _job_configs(spec, seeds, cache)
    create_tiny_backend(jobs[0]["backend"], seed=0).close()  # build the base model once, up front
    dirs = []
    for job in jobs:
        d = out / job["job"]["id"]
        d.mkdir(parents=True, exist_ok=True)
        (d / "config.yaml").write_text(yaml.safe_dump(job))
        dirs.append(d)
    with ThreadPoolExecutor(parallel) as pool:
        walls = list(pool.map(_run_job, dirs))
    return {
        d.name: {"rows": read_jsonl(d / "metrics.jsonl"), "wall_s": w}
        for d, w in zip(dirs, walls, strict=True)
    }


def _crossing(xs: np.ndarray, ys: np.ndarray, target: float) -> float | None:
    """First interpolated crossing of the target (rollcli.analysis's rule), None if never."""
    from rollcli.analysis.curves import first_crossing

    return first_crossing(xs, ys, target).number()


def _curve(rows: list[dict[str, Any]], axis: str) -> tuple[np.ndarray, np.ndarray]:
    ev = [r for r in rows if "eval/accuracy" in r]
    return np.array([r[axis] for r in ev], float), np.array([r["eval/accuracy"] for r in ev], float)


def _bootstrap_ratio(
    base: list[float], other: list[float], rng: np.random.Generator
) -> tuple[float, float]:
    if not base or not other:
        return float("nan"), float("nan")
    b, o = np.asarray(base), np.asarray(other)
    ratios = [rng.choice(b, b.size).mean() / rng.choice(o, o.size).mean() for _ in range(2000)]
    return float(np.percentile(ratios, 5)), float(np.percentile(ratios, 95))


def analyse(results: dict, baseline: str, fixed_target: float) -> dict[str, Any]:
    names = sorted({k.rsplit("-", 1)[0] for k in results}, key=lambda n: (n != baseline, n))
    by_name = {
        n: [v for k, v in sorted(results.items()) if k.rsplit("-", 1)[0] == n] for n in names
    }
    finals = {n: [runs["rows"][-1]["eval/accuracy"] for runs in by_name[n]] for n in names}
    targets = {"fixed": fixed_target, "grpo-final": float(np.mean(finals[baseline]))}
    rng = np.random.default_rng(0)
    table: dict[str, Any] = {"targets": targets, "allocators": {}}
    for n in names:
        entry: dict[str, Any] = {
            "seeds": len(by_name[n]),
            "final_accuracy_mean": float(np.mean(finals[n])),
            "final_accuracy_std": float(np.std(finals[n])),
            "total_rollouts_mean": float(
                np.mean([r["rows"][-1]["cum_rollouts"] for r in by_name[n]])
            ),
            "job_wall_s_mean": float(np.mean([r["wall_s"] for r in by_name[n]])),
            "zero_var_frac_first10": float(
                np.mean(
                    [np.mean([x["zero_var_frac"] for x in r["rows"][1:11]]) for r in by_name[n]]
                )
            ),
            "zero_var_frac_last10": float(
                np.mean(
                    [np.mean([x["zero_var_frac"] for x in r["rows"][1:][-10:]]) for r in by_name[n]]
                )
            ),
        }
        for tname, target in targets.items():
            for axis, label in (("cum_rollouts", "rollouts"), ("cum_tokens", "tokens")):
                hits = [_crossing(*_curve(r["rows"], axis), target) for r in by_name[n]]
                reached = [h for h in hits if h is not None]
                entry[f"{label}_to_{tname}"] = reached
                entry[f"{label}_to_{tname}_reached"] = f"{len(reached)}/{len(hits)}"
        table["allocators"][n] = entry
    base = table["allocators"][baseline]
    for entry in table["allocators"].values():
        for tname in targets:
            for label in ("rollouts", "tokens"):
                b, o = base[f"{label}_to_{tname}"], entry[f"{label}_to_{tname}"]
                # a mean over the few seeds that reached the target flatters: require a majority
                enough = 2 * len(b) > base["seeds"] and 2 * len(o) > entry["seeds"]
                speed = float(np.mean(b) / np.mean(o)) if enough else float("nan")
                entry[f"{label}_speedup_{tname}"] = speed
                entry[f"{label}_speedup_{tname}_ci90"] = (
                    _bootstrap_ratio(b, o, rng) if enough else (float("nan"), float("nan"))
                )
    return table


def allocator_table(table: dict[str, Any]) -> str:
    out = []
    for tname, target in table["targets"].items():
        out.append(f"\nTarget `{tname}` = accuracy {target:.3f}\n")
        out.append(
            "| allocator | rollouts to target (mean) | speedup (90% CI) | tokens to target | "
            "token speedup | reached | final accuracy | rollouts used |"
        )
        out.append("|---|---:|---:|---:|---:|---:|---:|---:|")
        for n, e in table["allocators"].items():
            r, t = e[f"rollouts_to_{tname}"], e[f"tokens_to_{tname}"]
            lo, hi = e[f"rollouts_speedup_{tname}_ci90"]
            out.append(
                f"| {n} | {np.mean(r) if r else float('nan'):,.0f} | "
                f"{e[f'rollouts_speedup_{tname}']:.2f}x ({lo:.2f}-{hi:.2f}) | "
                f"{np.mean(t) if t else float('nan'):,.0f} | {e[f'tokens_speedup_{tname}']:.2f}x | "
                f"{e[f'rollouts_to_{tname}_reached']} | "
                f"{e['final_accuracy_mean']:.3f} ± {e['final_accuracy_std']:.3f} | "
                f"{e['total_rollouts_mean']:,.0f} |"
            )
    out.append("\n| allocator | zero-variance share, steps 1-10 | last 10 steps | job wall s |")
    out.append("|---|---:|---:|---:|")
    for n, e in table["allocators"].items():
        out.append(
            f"| {n} | {e['zero_var_frac_first10']:.2f} | {e['zero_var_frac_last10']:.2f} | "
            f"{e['job_wall_s_mean']:.0f} |"
        )
    return "\n".join(out)


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


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("part", choices=["timing", "allocators", "quickstart"])
    parser.add_argument("--spec", type=Path, default=REPO / "experiments" / "tiny-allocators.yaml")
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--parallel", type=int, default=2)
    parser.add_argument("--steps", type=int, default=30, help="timing: steps per setting")
    parser.add_argument("--target", type=float, default=0.85, help="allocators: the fixed target")
    parser.add_argument("--cache", default=None, help="base-model cache dir (default: the usual)")
    parser.add_argument("--out", type=Path, default=Path(tempfile.gettempdir()) / "bench-tiny")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    if args.part == "timing":
        import torch

        torch.set_num_threads(1)
        results = bench_timing(args.steps, args.cache)
        atomic_write_json(args.out / "timing.json", results)
        print(timing_table(results))
    elif args.part == "allocators":
        results = run_allocators(
            args.spec, list(range(args.seeds)), args.out / "jobs", args.parallel, args.cache
        )
        table = analyse(results, "grpo", args.target)
        atomic_write_json(args.out / "allocators.json", table)
        print(allocator_table(table))
    else:
        result = bench_quickstart(args.spec)
        atomic_write_json(args.out / "quickstart.json", result)
        print(
            f"wall {result['wall_s']:.1f} s, child CPU {result['child_cpu_s']:.1f} s, rc {result['returncode']}"
        )
        print(result["tail"])


if __name__ == "__main__":
    main()
