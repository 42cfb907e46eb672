"""Base models that ship inside the package, so every machine starts from the same weights.

The default recipe's base model (the quickstart's and the paper regime's: both use the default
``base_*`` knobs) is shipped for several ``base_seed`` values as safetensors files in
``rollcli/data/tiny_base/``, next to ``manifest.json``, which maps each file's recipe hash
(:meth:`TinyConfig.base_recipe_hash`, without the torch version) to its file name, its sha256,
the recipe itself, and the build's statistics and software versions. A config whose recipe is
shipped loads that file (checksum verified) and never builds; every other recipe goes through the
cache (:mod:`rollcli.backends.tiny.base`).

A build is single-threaded, uses torch's deterministic algorithms and fixed seeds, and the
safetensors serialisation is canonical, so two builds on one machine give identical bytes
(``rollcli data build-base-models --check`` verifies the shipped files that way). Across CPU
types and torch versions floating-point kernels may differ: docs/tiny.md says what can.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import platform
from dataclasses import replace
from functools import cache
from pathlib import Path
from typing import Any

from rollcli.backends.tiny.config import TinyConfig
from rollcli.errors import RollcliError
from rollcli.store.atomic import atomic_write_bytes, atomic_write_json

__all__ = [
    "SHIPPED_BASE_SEEDS",
    "ShippedModelError",
    "shipped_dir",
    "read_manifest",
    "find_shipped",
    "load_shipped",
    "serialize_weights",
    "build_shipped",
]

# base_seed values shipped for every shipped recipe: enough to treat the base model as a random
# factor (three base models x the run seeds, docs/report.md)
SHIPPED_BASE_SEEDS: tuple[int, ...] = (0, 1, 2)
MANIFEST = "manifest.json"


class ShippedModelError(RollcliError):
    """A shipped base model whose bytes do not match the manifest (damaged or replaced)."""


def shipped_dir() -> Path:
    """The package folder that holds the shipped base models and their manifest."""
    import rollcli.data

    return Path(rollcli.data.__file__).parent / "tiny_base"


def shipped_recipes() -> list[TinyConfig]:
    """The recipes that ship: the default recipe (quickstart, paper regime) at every shipped seed."""
    return [TinyConfig(base_seed=seed) for seed in SHIPPED_BASE_SEEDS]


@cache
def _manifest(folder: Path) -> dict[str, Any]:
    path = folder / MANIFEST
    if not path.is_file():
        return {"models": {}}
    return json.loads(path.read_text())


def read_manifest(folder: Path | None = None) -> dict[str, Any]:
    """The manifest of ``folder`` (default: the package's); ``{"models": {}}`` if there is none."""
    return _manifest(folder or shipped_dir())


def find_shipped(config: TinyConfig, folder: Path | None = None) -> dict[str, Any] | None:
    """The manifest entry of this config's recipe, or None when the recipe is not shipped."""
    return read_manifest(folder)["models"].get(config.base_recipe_hash())


def load_shipped(entry: dict[str, Any], folder: Path | None = None) -> dict[str, Any]:
    """The weights of a shipped base model, after checking its sha256 against the manifest."""
    from safetensors.torch import load

    folder = folder or shipped_dir()
    path = folder / entry["file"]
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ShippedModelError(
            f"shipped tiny base model {path} cannot be read ({exc}); reinstall rollcli"
        ) from exc
    digest = hashlib.sha256(data).hexdigest()
    if digest != entry["sha256"]:
        raise ShippedModelError(
            f"shipped tiny base model {path}: sha256 {digest} does not match {entry['sha256']} "
            f"in {folder / MANIFEST}; the file is damaged or was replaced: reinstall rollcli, or "
            "regenerate the shipped files with `rollcli data build-base-models`"
        )
    return load(data)


def serialize_weights(weights: dict[str, Any], recipe_hash: str) -> bytes:
    """Canonical safetensors bytes of the weights (sorted keys, contiguous tensors)."""
    from safetensors.torch import save

    tensors = {k: weights[k].detach().contiguous() for k in sorted(weights)}
    return save(tensors, metadata={"recipe_hash": recipe_hash})


def build_bytes(config: TinyConfig, *, progress: bool = False) -> tuple[bytes, dict[str, Any]]:
    """Build the base model of ``config`` deterministically: its safetensors bytes and build info."""
    from rollcli.backends.tiny.base import train_base

    weights, info = train_base(config, progress=progress)
    return serialize_weights(weights, config.base_recipe_hash()), info


def build_machine() -> dict[str, Any]:
    """What a build's bytes can depend on beyond the recipe: the CPU and the SIMD kernels torch
    picked on it (docs/tiny.md, Determinism)."""
    import torch

    cpu = None
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    return {
        "machine": platform.machine(),
        "cpu": cpu or platform.processor() or None,
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
    }


def build_shipped(
    out: Path,
    configs: list[TinyConfig] | None = None,
    *,
    progress: bool = True,
) -> list[dict[str, Any]]:
    """(Re)build the shipped base models into ``out`` and write its manifest; returns the entries.

    The cache root of each config is ignored (the recipe is what counts). Entries of the existing
    manifest for other recipes are kept.
    """
    import numpy as np
    import torch

    from rollcli.backends.tiny.base import BUILD_THREADS

    out.mkdir(parents=True, exist_ok=True)
    manifest_path = out / MANIFEST
    models = (
        dict(json.loads(manifest_path.read_text())["models"]) if manifest_path.is_file() else {}
    )
    entries = []
    for config in configs or shipped_recipes():
        config = replace(config, cache_dir=None)
        recipe_hash = config.base_recipe_hash()
        data, info = build_bytes(config, progress=progress)
        name = f"{recipe_hash}.safetensors"
        atomic_write_bytes(out / name, data)
        entry = {
            "file": name,
            "sha256": hashlib.sha256(data).hexdigest(),
            "bytes": len(data),
            "recipe": config.base_recipe(),
            "built_with": {
                "torch": torch.__version__,
                "numpy": np.__version__,
                **build_machine(),
                "threads": BUILD_THREADS,
            },
            **info,
        }
        models[recipe_hash] = entry
        entries.append({"recipe_hash": recipe_hash, **entry})
    atomic_write_json(
        manifest_path,
        {
            "about": "tiny base models shipped with rollcli (docs/tiny.md); regenerate with "
            "`rollcli data build-base-models`",
            "models": dict(sorted(models.items())),
        },
    )
    _manifest.cache_clear()
    return entries
