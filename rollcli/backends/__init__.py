"""Backends: what generates rollouts and learns (sim: analytic; tiny: small transformer; verl).

Backends are created by kind with their modules imported lazily, so importing this package stays
cheap (no torch until the tiny backend is asked for).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any

from rollcli.backends.api import BaseBackend
from rollcli.errors import suggest

__all__ = ["BaseBackend", "BACKENDS", "TRAINER_DRIVEN", "create_backend", "trainer_driven_runner"]

# kind -> "module:factory". factory(config: Mapping, *, seed: int, job_dir: Path | None) -> BaseBackend
BACKENDS: dict[str, str] = {
    "sim": "rollcli.backends.sim:create_sim_backend",
    "tiny": "rollcli.backends.tiny:create_tiny_backend",
    "verl": "rollcli.backends.verl:create_verl_backend",
}
# kinds whose own trainer drives the step loop (it runs rollcli's step routine from inside):
# kind -> "module:function" with the signature run_train_job(job_dir, *, job, stop, callbacks)
TRAINER_DRIVEN: dict[str, str] = {
    "verl": "rollcli.backends.verl:run_train_job",
}


def _resolve(target: str) -> Any:
    module_name, name = target.split(":")
    return getattr(importlib.import_module(module_name), name)


def trainer_driven_runner(kind: str) -> Callable[..., None] | None:
    """The train-job runner of a trainer-driven backend kind, or None for a stepped backend."""
    return _resolve(TRAINER_DRIVEN[kind]) if kind in TRAINER_DRIVEN else None


def create_backend(config: Mapping[str, Any], *, seed: int, job_dir: Any = None) -> BaseBackend:
    """Create a backend from its spec section (``{kind: sim, ...}``)."""
    kind = config.get("kind")
    if kind not in BACKENDS:
        hint = suggest(kind, BACKENDS, sentence=True)
        raise ValueError(f"unknown backend kind '{kind}'.{hint} Valid: {', '.join(BACKENDS)}.")
    return _resolve(BACKENDS[kind])(config, seed=seed, job_dir=job_dir)
