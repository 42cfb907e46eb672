"""Which pip extra a feature needs, and one clear line when it is not installed.

``pip install rollcli`` is the light core: specs, plans, the sim backend, Slurm launch and the
reports. The tiny backend (torch), W&B tracking (wandb), ``rollcli eval``'s math grader
(math-verify) and the verl backend come with extras (pyproject.toml). Installation is checked with
:func:`importlib.util.find_spec`, which imports nothing, so a check costs microseconds and the
CLI stays fast; the check runs at ``validate``/``plan``/``run`` time, before any job starts.
"""

from __future__ import annotations

import importlib.util
from typing import Any

from rollcli.errors import RollcliError

__all__ = ["EXTRAS", "MissingExtraError", "missing_modules", "require_extra", "spec_extras"]

# extra -> the modules it provides that rollcli imports (pyproject.toml's optional-dependencies)
EXTRAS: dict[str, tuple[str, ...]] = {
    "tiny": ("torch", "safetensors"),
    "wandb": ("wandb",),
    "eval": ("math_verify",),
    "hf": ("transformers", "torch"),
    "verl": ("verl", "transformers", "math_verify"),
}
# backend kind -> the extra its jobs need (sim needs none)
BACKEND_EXTRAS: dict[str, str] = {"tiny": "tiny", "verl": "verl"}


class MissingExtraError(RollcliError):
    """A feature whose pip extra is not installed (exit code 2, like a spec that cannot run)."""

    exit_code = 2


def missing_modules(extra: str) -> list[str]:
    """The modules of ``extra`` that this environment cannot import (empty: installed)."""
    missing = []
    for module in EXTRAS[extra]:
        try:
            found = importlib.util.find_spec(module) is not None
        except (ImportError, ValueError):  # a broken or half-removed install
            found = False
        if not found:
            missing.append(module)
    return missing


def install_hint(extra: str) -> str:
    """The pip command that installs ``extra`` (quoted for the shell)."""
    return f"pip install 'rollcli[{extra}]'"


def require_extra(extra: str, what: str) -> None:
    """Raise :class:`MissingExtraError` when ``extra`` is not installed: ``"<what> needs the
    `<extra>` extra: pip install 'rollcli[<extra>]' (missing: torch)"``."""
    missing = missing_modules(extra)
    if missing:
        raise MissingExtraError(
            f"{what} needs the `{extra}` extra: {install_hint(extra)} "
            f"(missing: {', '.join(missing)})"
        )


def spec_extras(spec: Any) -> list[tuple[str, str]]:
    """``(what, extra)`` for each extra that running ``spec`` needs: its backend's, and wandb's
    when ``tracking.wandb.mode`` is ``online`` or ``offline`` (``auto`` without wandb installed
    tracks nothing, see :func:`rollcli.analysis.tracking.resolve_mode`)."""
    needs = []
    kind = spec.backend.kind
    if kind in BACKEND_EXTRAS:
        needs.append((f"backend {kind}", BACKEND_EXTRAS[kind]))
    mode = spec.tracking.wandb.mode
    if mode in ("online", "offline"):
        needs.append((f"tracking.wandb.mode {mode}", "wandb"))
    return needs


def require_spec_extras(spec: Any, source: object = None) -> None:
    """Raise :class:`MissingExtraError` for the first extra ``spec`` needs that is missing;
    ``source`` (the spec's file) starts the line."""
    for what, extra in spec_extras(spec):
        try:
            require_extra(extra, what)
        except MissingExtraError as error:
            if source is None:
                raise
            raise MissingExtraError(f"{source}: {error}") from None
