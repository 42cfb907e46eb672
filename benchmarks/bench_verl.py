"""Benchmark: a few GRPO steps of verl's real trainer driven by rollcli allocators.

On CPU (the default) this is the CI-sized run of docs/benchmarks/verl.md: a tiny Qwen2 model
built in code, 3 steps, transformers rollouts, wall time *including* Ray's start (target: at most
90 s for uniform). On a GPU (``--device cuda``, what ``scripts/gpu-check.sh`` runs) the same jobs
use vLLM rollouts and FSDP on one GPU. Each allocator runs as its own job in a fresh child
process, so every measurement pays the full start-up; per-step times come from the job's
``metrics.jsonl``.

    python benchmarks/bench_verl.py                                   # CPU, uniform, 3 steps
    python benchmarks/bench_verl.py --allocators uniform,pilot_commit --steps 3
    python benchmarks/bench_verl.py --device cuda --steps 5 --rollouts 512 --response-len 512
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ALLOCATORS = {
    "uniform": {"kind": "uniform", "n": 8},
    "pilot_commit": {
        "kind": "pilot_commit",
        "n_pilot": 4,
        "n_commit": 4,
        "p_lower": 0.25,
        "p_upper": 0.75,
        "pilot_batch_factor": 2,
        "on_max_rounds": "stop",
    },
    "vigor": {"kind": "vigor", "m0": 2, "alpha": 0.5, "gamma": 2.0, "rounds": 3},
}


def job_config(args: argparse.Namespace, allocator: str) -> dict:
    real_model = args.model != "tiny"
    backend = {
        "kind": "verl",
        "device": args.device,
        "model": args.model,
        "train_data": "math_train",
        "train_max_samples": args.train_samples,
        "val_max_samples": 2,
        "max_prompt_len": 512 if real_model else 384,
        "max_response_len": args.response_len,
        "lr": 1.0e-6 if real_model else 1.0e-4,
        # a random tiny model never solves MATH: a fair coin gives the allocators variance
        "reward": "math" if real_model else "rollcli.backends.verl.rewards:toy_reward",
        "val_before_train": False,
    }
    if args.device == "cuda":
        backend.update(
            {
                "nnodes": 1,
                "gpus_per_node": 1,
                "gpu_memory_utilization": 0.4,
                "rollout_engine": "vllm",
            }
        )
    return {
        "experiment": "bench-verl",
        "job": {"id": allocator, "type": "train", "allocator": allocator, "seed": 0},
        "backend": backend,
        "allocator": ALLOCATORS[allocator],
        "budget": {"steps": args.steps, "rollouts_per_step": args.rollouts},
        "eval": {},
        "checkpoint": {"every": 1_000_000},
        "tracking": {"wandb": {"mode": "disabled"}},
    }


def run_one(args: argparse.Namespace, allocator: str, root: Path) -> dict:
    job_dir = root / allocator
    job_dir.mkdir(parents=True, exist_ok=True)
    (job_dir / "config.yaml").write_text(yaml.safe_dump(job_config(args, allocator)))
    log = job_dir / "bench.log"
    start = time.perf_counter()
    with open(log, "w") as out:
        code = subprocess.call(
            [
                sys.executable,
                "-c",
                f"from rollcli.backends.verl import run_train_job as r; r({str(job_dir)!r})",
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
    wall = time.perf_counter() - start
    if code:
        tail = log.read_text(errors="replace")[-3000:]
        raise SystemExit(f"{allocator}: the job failed (exit {code}); log {log}:\n{tail}")
    rows = [json.loads(line) for line in (job_dir / "metrics.jsonl").read_text().splitlines()]
    steps = [r for r in rows if r["step"] > 0]
    return {
        "allocator": allocator,
        "wall_s": round(wall, 1),
        "train_s": round(sum(r["time/step_s"] for r in steps), 2),
        "startup_s": round(wall - sum(r["time/step_s"] for r in steps), 1),
        "step_s": [round(r["time/step_s"], 2) for r in steps],
        "generate_s": [round(r["time/generate_s"], 2) for r in steps],
        "update_s": [round(r["time/update_s"], 2) for r in steps],
        "cum_rollouts": steps[-1]["cum_rollouts"],
        "cum_tokens": steps[-1]["cum_tokens"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    parser.add_argument("--allocators", default="uniform")
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--rollouts", type=int, default=16, help="rollouts per step")
    parser.add_argument("--response-len", type=int, default=16)
    parser.add_argument("--train-samples", type=int, default=256)
    parser.add_argument("--model", default="tiny", help="'tiny' or a local HF model folder")
    parser.add_argument("--out", type=Path, default=None, help="keep the job folders here")
    parser.add_argument("--json", action="store_true", help="print one JSON line per allocator")
    args = parser.parse_args()
    root = args.out or Path(tempfile.mkdtemp(prefix="bench-verl-"))
    for allocator in args.allocators.split(","):
        result = run_one(args, allocator, root)
        if args.json:
            print(json.dumps(result), flush=True)
        else:
            print(
                f"{allocator:13s} wall {result['wall_s']:6.1f} s (start-up {result['startup_s']:5.1f} s, "
                f"{len(result['step_s'])} steps {result['train_s']:5.2f} s) per step {result['step_s']} "
                f"generate {result['generate_s']} update {result['update_s']} "
                f"rollouts {result['cum_rollouts']} tokens {result['cum_tokens']}",
                flush=True,
            )


if __name__ == "__main__":
    main()
