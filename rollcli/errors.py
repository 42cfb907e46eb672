"""Domain errors. The CLI turns each into one line that says what to do next, and an exit code.

:func:`suggest` words every "did you mean" of rollcli (spec keys, kinds, templates, job names).
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable

__all__ = [
    "RAY_SLOW_START",
    "RollcliError",
    "SpecError",
    "StoreError",
    "LockHeldError",
    "closest",
    "suggest",
]

# What Ray raises when a starting node's raylet misses the fixed 30 s it is given to register
# with the GCS (ray/_private/node.py, `raylet_start_wait_time_s`): on a loaded machine a start
# that would succeed runs out. Both of rollcli's Ray starts (a Slurm job's `ray start`, a local
# verl job's `ray.init`) start again on it.
RAY_SLOW_START = "The current node timed out during startup"


def closest(name: object, valid: Iterable[object]) -> str | None:
    """The valid name closest to ``name`` (difflib's ratio of at least 0.6), or None."""
    matches = difflib.get_close_matches(str(name), [str(v) for v in valid], n=1)
    return matches[0] if matches else None


def suggest(
    name: object, valid: Iterable[object], *, sentence: bool = False, listing: bool = False
) -> str:
    """``"; did you mean 'x'?"`` to append inside a line, or with ``sentence`` ``" Did you mean
    'x'?"`` after a full stop; ``""`` when no valid name is close. With ``listing``, the valid
    names follow: ``" (valid: a, b)"``."""
    valid = [str(v) for v in valid]
    match = closest(name, valid)
    hint = ""
    if match is not None:
        hint = f" Did you mean '{match}'?" if sentence else f"; did you mean '{match}'?"
    if listing and valid:
        hint += f" (valid: {', '.join(sorted(valid))})"
    return hint


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
