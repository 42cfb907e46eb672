"""The ``tiny`` backend: a small transformer trained with real GRPO on verifiable character tasks.

Importing this package is cheap (no torch): the factory imports the torch modules on first use,
so the spec can import :class:`TinyConfig` from ``rollcli.backends.tiny.config`` freely.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rollcli.backends.tiny.config import TinyConfig

__all__ = ["TinyConfig", "create_tiny_backend"]


def create_tiny_backend(
    config: Mapping[str, Any] | TinyConfig, *, seed: int, job_dir: Path | None = None
) -> Any:
    """Create a :class:`~rollcli.backends.tiny.backend.TinyBackend` from its spec section.

    ``config`` is a :class:`TinyConfig` or a mapping of its fields (``kind: tiny`` included or
    not); unknown keys raise ``ValueError`` naming them. Loads the shipped base model of its recipe,
    or builds (and caches) it on first use.
    """
    from rollcli.backends.tiny.backend import TinyBackend, config_from_mapping

    if not isinstance(config, TinyConfig):
        config = config_from_mapping(config)
    return TinyBackend(config, seed=seed, job_dir=job_dir)
