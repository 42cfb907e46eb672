"""Fixtures for analysis tests: a synthetic run folder written exactly as docs/CONTRACTS.md §5 lays
it out, with accuracy curves whose crossings are known in closed form, and a reader of W&B's
offline ``.wandb`` log (LevelDB-style records of protobuf messages)."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from rollcli.store.atomic import append_jsonl, atomic_write_json

STEPS = 40
EVAL_EVERY = 5

# allocator -> (kind, rollouts per step, tokens per rollout, seconds per step, accuracy(k, seed))
# k = index of the evaluation (0..8); all curves are piecewise linear between evaluations, so the
# interpolated crossing of each seed is known exactly.
ALLOCATORS = {
    "grpo": ("uniform", 64, 5, 0.10, lambda k, s: 0.30 + 0.05 * k + 0.01 * s),
    "pc": ("pilot_commit", 64, 6, 0.12, lambda k, s: min(0.80, 0.30 + 0.0625 * k + 0.01 * s)),
    "dapo": ("dynamic", 128, 5, 0.20, lambda k, s: 0.30 + 0.04 * k + 0.01 * s),
    # seed 2 peaks at 0.70 (k=6) then dips: never reaches the 0.71 target
    "vigor": (
        "vigor",
        64,
        5,
        0.11,
        lambda k, s: (
            (0.30 + 0.1 * k if k <= 4 else 0.70)
            if s == 2
            else min(0.75, 0.30 + 0.08 * k + 0.01 * s)
        ),
    ),
}
SEEDS = (0, 1, 2)


def write_synthetic_run(
    run_dir: Path,
    *,
    allocators: dict | None = None,
    seeds: tuple[int, ...] = SEEDS,
    target: dict | None = None,
    experiment: str = "synthetic",
    statuses: dict[tuple[str, int], str] | None = None,
    tag: str = "",
) -> Path:
    """Write manifest.json, jobs/<id>/{state.json,metrics.jsonl} for ``allocators`` × ``seeds``."""
    allocators = allocators or ALLOCATORS
    statuses = statuses or {}
    spec = {
        "name": experiment,
        "backend": {"kind": "sim"},
        "budget": {"steps": STEPS, "rollouts_per_step": 64},
        "allocators": {name: {"kind": spec[0]} for name, spec in allocators.items()},
        "seeds": list(seeds),
        "eval": {"every": EVAL_EVERY},
        "target": target or {"baseline": "grpo", "metric": "accuracy", "at": "final", "smooth": 1},
        "tracking": {"wandb": {"project": "rollcli-test", "mode": "disabled"}},
    }
    jobs = []
    for index, (name, (_, per_step, tok, step_s, acc)) in enumerate(allocators.items()):
        for seed in seeds:
            job_id = f"{name}{tag}{seed:02d}abcdef"[:10]  # a tag: other jobs, same names
            jobs.append(
                {"id": job_id, "type": "train", "allocator": name, "seed": seed, "depends_on": []}
            )
            job_dir = run_dir / "jobs" / job_id
            rows = [{"step": 0, "cum_rollouts": 0, "cum_tokens": 0, "eval/accuracy": acc(0, seed)}]
            for step in range(1, STEPS + 1):
                row = {
                    "step": step,
                    "cum_rollouts": per_step * step,
                    "cum_tokens": per_step * tok * step,
                    "cum_rollouts_trained": 64 * step,
                    "step_rollouts": per_step,
                    "step_tokens": per_step * tok,
                    "wall_s": round(step_s * step, 6),
                    "time/step_s": step_s,
                    "reward_mean": 0.5,
                    "reward_var": round(0.2 - 0.001 * step + 0.01 * seed + 0.02 * index, 6),
                    "zero_var_frac": round(0.3 + 0.005 * step - 0.05 * index, 6),
                }
                if step % EVAL_EVERY == 0:
                    row["eval/accuracy"] = acc(step // EVAL_EVERY, seed)
                rows.append(row)
            append_jsonl(job_dir / "metrics.jsonl", rows)
            atomic_write_json(
                job_dir / "state.json",
                {"status": statuses.get((name, seed), "done"), "attempts": 1},
            )
    jobs.append({"id": "report0000", "type": "report", "allocator": None, "seed": None})
    atomic_write_json(
        run_dir / "manifest.json",
        {"experiment": experiment, "spec": spec, "plan": {"jobs": jobs}, "git_commit": "test"},
    )
    return run_dir


@pytest.fixture
def synthetic_run(tmp_path: Path) -> Path:
    return write_synthetic_run(tmp_path / "runs" / "synthetic")


@pytest.fixture
def make_run():
    """:func:`write_synthetic_run`, for tests that need other targets or job states."""
    return write_synthetic_run


def wandb_records(path: Path):
    """Yield the protobuf ``Record`` messages of an offline ``run-<id>.wandb`` file."""
    from wandb.proto import wandb_internal_pb2 as pb

    data = path.read_bytes()
    assert data[:4] == b":W&B", "not a W&B transaction log"
    pos, block, buf = 7, 32768, b""
    while pos + 7 <= len(data):
        left = block - pos % block
        if left < 7:  # block trailer too short for a header: padding
            pos += left
            continue
        length, kind = struct.unpack("<HB", data[pos + 4 : pos + 7])
        if length == 0 and kind == 0:
            pos += left
            continue
        chunk = data[pos + 7 : pos + 7 + length]
        pos += 7 + length
        if kind == 1:
            whole = chunk
        elif kind == 2:
            buf = chunk
            continue
        elif kind == 3:
            buf += chunk
            continue
        else:
            whole, buf = buf + chunk, b""
        record = pb.Record()
        record.ParseFromString(whole)
        yield record


@pytest.fixture
def read_wandb_log():
    """:func:`wandb_records`, for tests that inspect offline W&B runs."""
    return wandb_records
