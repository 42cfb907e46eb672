"""Fixtures of the tiny backend's tests: a micro config whose base model builds in about a second."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest


def micro_config(cache_dir: Path, **overrides: Any) -> dict[str, Any]:
    """A tiny-backend spec section small enough for unit tests (1 layer, width 16, 3 levels)."""
    return {
        "kind": "tiny",
        "max_level": 3,
        "num_train_prompts": 48,
        "eval_prompts_per_level": 3,
        "eval_samples": 2,
        "d_model": 16,
        "num_layers": 1,
        "num_heads": 2,
        "base_steps": 40,
        "base_batch_size": 16,
        "lr": 1e-3,
        "cache_dir": str(cache_dir),
        **overrides,
    }


def learning_micro_config(cache_dir: Path, **overrides: Any) -> dict[str, Any]:
    """A micro config whose base model is right now and then (one level, ~1/3 of 8-rollout groups
    informative), so updates take real Adam steps; :func:`micro_config`'s base is always wrong."""
    return micro_config(cache_dir, max_level=1, base_steps=150, base_lr=1e-2, **overrides)


@pytest.fixture(scope="session")
def tiny_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One base-model cache for the whole session (the micro base is built once)."""
    return tmp_path_factory.mktemp("tiny-cache")


@pytest.fixture
def micro(tiny_cache: Path) -> dict[str, Any]:
    return micro_config(tiny_cache)
