"""Domain errors. The CLI turns each into one line that says what to do next, and an exit code."""

from __future__ import annotations

__all__ = ["RollcliError", "SpecError", "StoreError", "LockHeldError"]


class RollcliError(Exception):
    """An error the user can fix; shown as one line (tracebacks only with ROLLCLI_DEBUG=1)."""

    exit_code = 1


class SpecError(RollcliError):
    """A spec or override that does not validate (names file:line:column and field)."""

    exit_code = 2


class StoreError(RollcliError):
    """A run folder that is missing, foreign or inconsistent."""


class LockHeldError(RollcliError):
    """Another rollcli process holds the experiment's lock."""

    exit_code = 3
