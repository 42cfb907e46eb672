"""The "partly capable" base model: built once by supervised training on noisy labels, cached.

Recipe (every number is a :class:`TinyConfig` knob, hashed into the cache key): ``base_steps``
Adam steps (linear warm-up, cosine decay from ``base_lr``) on fresh random problems of every
task and level, cross-entropy on the answer tokens only, where each error site of a label (a
carry, an adjacent pair) goes wrong with probability ``base_noise``. The model learns the task
*and* the noise, so its success rate on a prompt falls with the prompt's number of error sites:
prompts without carries are nearly always right, long carry chains nearly always wrong —
GRPO then has something to fix, unevenly across prompts.

Shipped recipes (the default recipe at a few ``base_seed`` values, :mod:`.shipped`) load from
the package and never build. Any other recipe is cached: ``<cache root>/<recipe hash>/base.pt``
where the root is the config's ``cache_dir``, else ``$ROLLCLI_CACHE/tiny``, else
``~/.cache/rollcli/tiny``; the hash covers the recipe and the torch version. Building is
single-threaded, seeded and uses torch's deterministic algorithms, so it is reproducible on one
machine and torch version. A file lock makes parallel jobs wait for one builder; the weights
are written atomically with a JSON description of the recipe beside them.
"""

from __future__ import annotations

import contextlib
import fcntl
import io
import math
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import torch

from rollcli.backends.tiny.config import TinyConfig
from rollcli.backends.tiny.model import TinyGPT, pad_batch
from rollcli.backends.tiny.shipped import find_shipped, load_shipped
from rollcli.backends.tiny.tasks import (
    VOCAB_SIZE,
    encode,
    make_problem,
    max_answer_len,
    max_prompt_len,
    noisy_answer,
)
from rollcli.store.atomic import atomic_write_bytes, atomic_write_json, read_json

__all__ = [
    "create_model",
    "base_cache_path",
    "load_or_build_base",
    "read_base_info",
    "train_base",
    "deterministic_build",
]

# a build always runs on this many threads: the reduction order, hence the bytes, depend on it
BUILD_THREADS = 1


def create_model(config: TinyConfig) -> TinyGPT:
    """A freshly initialised model of the config's shape (initialised from the global RNG)."""
    max_len = max_prompt_len(config.max_level) + max_answer_len(config.max_level)
    return TinyGPT(VOCAB_SIZE, config.d_model, config.num_layers, config.num_heads, max_len)


def base_cache_path(config: TinyConfig) -> Path:
    """Where the base model of this recipe lives (the folder may not exist yet)."""
    if config.cache_dir:
        root = Path(config.cache_dir).expanduser()
    elif os.environ.get("ROLLCLI_CACHE"):
        root = Path(os.environ["ROLLCLI_CACHE"]).expanduser() / "tiny"
    else:
        root = Path.home() / ".cache" / "rollcli" / "tiny"
    torch_version = ".".join(torch.__version__.split("+")[0].split(".")[:2])
    return root / config.base_recipe_hash({"torch": torch_version}) / "base.pt"


@contextlib.contextmanager
def _file_lock(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+") as handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


def load_or_build_base(config: TinyConfig, *, progress: bool = True) -> dict[str, torch.Tensor]:
    """The base model's weights: the shipped file of a shipped recipe, else read from the cache,
    or built (and cached) on first use."""
    shipped = find_shipped(config)
    if shipped is not None:
        return load_shipped(shipped)
    path = base_cache_path(config)
    if path.exists():
        return _load(path)
    with _file_lock(path.parent / ".lock"):
        if path.exists():  # another process built it while we waited
            return _load(path)
        if progress:  # a plain line first: a job's log (and the live view's note) shows it
            print(
                f"building the tiny base model (once per recipe, ~30 s on 2 cores; cached in "
                f"{path.parent})",
                file=sys.stderr,
                flush=True,
            )
        weights, info = train_base(config, progress=progress)
        if progress:
            probe = info["probe"]
            print(
                f"tiny base model built in {info['build_seconds']:.0f} s: sampled accuracy "
                f"{probe['accuracy']:.2f}, zero-variance share of 8-rollout groups "
                f"{probe['zero_var_frac']:.2f} (all right {probe['all_right_frac']:.2f}, "
                f"all wrong {probe['all_wrong_frac']:.2f}); cached in {path.parent}",
                file=sys.stderr,
            )
        buffer = io.BytesIO()
        torch.save(weights, buffer)
        atomic_write_json(path.parent / "recipe.json", {"recipe": config.base_recipe(), **info})
        atomic_write_bytes(path, buffer.getvalue())
    return weights


def _load(path: Path) -> dict[str, torch.Tensor]:
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # a corrupt file: say where it is and how to recover
        raise RuntimeError(
            f"cannot read the cached tiny base model {path} ({exc}); delete that folder to rebuild it"
        ) from exc


def read_base_info(config: TinyConfig) -> dict[str, Any] | None:
    """The recipe and build statistics of a shipped base model (its manifest entry) or stored
    beside a cached one, if any."""
    shipped = find_shipped(config)
    if shipped is not None:
        return {**shipped, "shipped": True}
    info = base_cache_path(config).parent / "recipe.json"
    return read_json(info) if info.exists() else None


def _batch(
    config: TinyConfig, rng: np.random.Generator, size: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    tasks = config.tasks
    shares = np.asarray([config.task_mix[t] for t in tasks], float)
    picks = rng.choice(len(tasks), size=size, p=shares / shares.sum())
    levels = rng.integers(1, config.max_level + 1, size=size)
    prompts, answers = [], []
    for task_index, level in zip(picks, levels, strict=True):
        task = tasks[int(task_index)]
        prompt, payload = make_problem(task, int(level), config.max_level, rng)
        prompts.append(encode(prompt))
        answers.append(encode(noisy_answer(task, payload, config.base_noise, rng) + "."))
    return pad_batch(prompts, answers)


@contextlib.contextmanager
def deterministic_build() -> Iterator[None]:
    """Fixed threads and torch's deterministic algorithms for the duration of a build (restored
    after: both are process-wide)."""
    threads = torch.get_num_threads()
    deterministic = torch.are_deterministic_algorithms_enabled()
    torch.set_num_threads(BUILD_THREADS)
    torch.use_deterministic_algorithms(True)
    try:
        yield
    finally:
        torch.use_deterministic_algorithms(deterministic)
        torch.set_num_threads(threads)


def train_base(
    config: TinyConfig, *, progress: bool = True
) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    """Train the base model from scratch (deterministic on one machine); returns weights and stats."""
    with deterministic_build():
        return _train_base(config, progress=progress)


def _train_base(
    config: TinyConfig, *, progress: bool
) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    import time

    from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

    start = time.perf_counter()
    torch.manual_seed(config.base_seed)
    model = create_model(config)
    rng = np.random.default_rng([config.base_seed, 0xBA5E])
    optimizer = torch.optim.AdamW(model.parameters(), lr=config.base_lr, weight_decay=0.01)
    warmup = max(1, config.base_steps // 20)

    def lr_at(step: int) -> float:
        if step < warmup:
            return config.base_lr * (step + 1) / warmup
        frac = (step - warmup) / max(1, config.base_steps - warmup)
        return config.base_lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * frac)))

    columns = (
        TextColumn("building tiny base model"),
        BarColumn(),
        TextColumn("{task.completed}/{task.total} steps  loss {task.fields[loss]:.3f}"),
        TimeRemainingColumn(),
    )
    loss_value = float("nan")
    with Progress(*columns, disable=not progress, transient=False) as bar:
        task_id = bar.add_task("base", total=config.base_steps, loss=loss_value)
        model.train()
        for step in range(config.base_steps):
            inputs, targets, mask = _batch(config, rng, config.base_batch_size)
            for group in optimizer.param_groups:
                group["lr"] = lr_at(step)
            logits, _ = model(inputs)
            losses = torch.nn.functional.cross_entropy(
                logits.reshape(-1, logits.shape[-1]), targets.reshape(-1), reduction="none"
            )
            loss = (losses * mask.reshape(-1)).sum() / mask.sum()
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            value = float(loss.detach())
            loss_value = 0.9 * loss_value + 0.1 * value if step else value
            bar.update(task_id, advance=1, loss=loss_value)
    build_seconds = time.perf_counter() - start
    probe = probe_success(model, config, num_prompts=512, num_samples=8)
    weights = {k: v.detach().clone() for k, v in model.state_dict().items()}
    info = {
        "build_seconds": round(build_seconds, 2),
        "final_loss": round(loss_value, 4),
        "probe": probe,
    }
    return weights, info


def probe_success(
    model: TinyGPT, config: TinyConfig, *, num_prompts: int, num_samples: int
) -> dict[str, Any]:
    """Sampled success rates (T=1) on fresh random prompts: accuracy and the zero-variance share."""
    from rollcli.backends.tiny.model import sample
    from rollcli.backends.tiny.tasks import grade

    rng = np.random.default_rng([config.base_seed, 0x9B0BE])
    tasks = config.tasks
    prompts, answers, levels = [], [], []
    for i in range(num_prompts):
        task = tasks[i % len(tasks)]
        level = 1 + (i // len(tasks)) % config.max_level
        prompt, payload = make_problem(task, level, config.max_level, rng)
        prompts.append(tuple(encode(prompt)))
        answers.append(tuple(encode(noisy_answer(task, payload, 0.0, None) + ".")))
        levels.append(level)
    repeated = [p for p in prompts for _ in range(num_samples)]
    generator = torch.Generator().manual_seed(config.base_seed)
    responses = sample(
        model,
        repeated,
        max_new_tokens=max_answer_len(config.max_level),
        temperature=1.0,
        generator=generator,
    )
    ok = np.asarray([grade(r, answers[i // num_samples]) for i, r in enumerate(responses)]).reshape(
        num_prompts, num_samples
    )
    p = ok.mean(axis=1)
    lv = np.asarray(levels)
    return {
        "num_prompts": num_prompts,
        "num_samples": num_samples,
        "accuracy": round(float(p.mean()), 4),
        "zero_var_frac": round(float(np.mean((p == 0) | (p == 1))), 4),
        "all_right_frac": round(float(np.mean(p == 1)), 4),
        "all_wrong_frac": round(float(np.mean(p == 0)), 4),
        "levels": {
            str(k): round(float(p[lv == k].mean()), 4) for k in range(1, config.max_level + 1)
        },
    }
