"""``rollcli doctor``: the preflight a user runs on their cluster before a first GPU run.

:func:`run_checks` runs every check of :mod:`rollcli.doctor.checks` (GPU stack versions against
the pins, flash-attn, CUDA and driver, NCCL settings, Ray's address file, the code sandbox,
the run folder's file system, the Hugging Face cache, Slurm and srun's CPUs, W&B) and
:func:`render` prints one line per check with its fix. A check that cannot run here says so
(``skip``); ``fail`` lines make the command exit non-zero.
"""

from __future__ import annotations

from collections.abc import Iterable

from rollcli.doctor.checks import ALL_CHECKS, Check, Context

__all__ = ["Check", "Context", "failed", "render", "run_checks"]

_MARK = {"ok": "ok  ", "warn": "WARN", "fail": "FAIL", "skip": "skip"}


def run_checks(ctx: Context) -> list[Check]:
    """Every check's lines, in order; a check that raises becomes a ``fail`` line naming it."""
    out: list[Check] = []
    for check in ALL_CHECKS:
        name = check.__name__.removeprefix("check_").replace("_", " ")
        try:
            out += check(ctx)
        except Exception as error:  # noqa: BLE001 - one broken probe must not hide the others
            out.append(
                Check(name, "fail", f"the check itself failed: {type(error).__name__}: {error}")
            )
    return out


def render(checks: Iterable[Check]) -> list[str]:
    """One line per check: status, name, what was found, and the fix for warn/fail."""
    lines = []
    for c in checks:
        fix = f" -> fix: {c.fix}" if c.fix and c.status in ("warn", "fail") else ""
        lines.append(f"{_MARK[c.status]}  {c.name}: {c.detail}{fix}")
    return lines


def failed(checks: Iterable[Check]) -> list[Check]:
    return [c for c in checks if c.status == "fail"]
