"""Job progress from ``metrics.jsonl`` without rereading it: step, rollouts, accuracy, ETA.

:class:`MetricsTail` keeps a byte offset per file and parses only lines appended since the last
read (a torn last line is left for the next read; a file that shrank — rows dropped on resume —
is reread from the start). Used by the live view of ``rollcli run`` and by ``rollcli status``.
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rollcli.store.damaged import is_number

__all__ = ["MetricsTail", "JobProgress", "fmt_eta"]


@dataclass
class JobProgress:
    step: int | None = None
    cum_rollouts: int | None = None
    accuracy: float | None = None
    rows: int = 0
    last: dict[str, Any] = field(default_factory=dict)
    # the first step of the current run of steps that generated nothing (a drained prompt pool)
    empty_since: int | None = None
    # (monotonic time, step) of the first row seen by this observer: the ETA's rate baseline
    _first_seen: tuple[float, int] | None = None
    _latest_seen: tuple[float, int] | None = None

    def eta_s(self, total_steps: int | None) -> float | None:
        if total_steps is None or self._first_seen is None or self._latest_seen is None:
            return None
        (t0, s0), (t1, s1) = self._first_seen, self._latest_seen
        if s1 <= s0:
            return None
        per_step = (t1 - t0) / (s1 - s0)
        return max(0.0, (total_steps - s1) * per_step - (time.monotonic() - t1))


def fmt_eta(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    seconds = int(round(seconds))
    if seconds >= 3600:
        return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"
    if seconds >= 60:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds}s"


def _number(value: object) -> bool:
    """An int or float that converts to float (an int of 10**400 does not)."""
    return is_number(value)


class MetricsTail:
    """Incremental reader of one job's ``metrics.jsonl``."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.offset = 0
        self.progress = JobProgress()

    def _reset(self) -> None:
        self.offset = 0
        self.progress = JobProgress(_first_seen=None)

    def read(self) -> JobProgress:
        try:
            size = self.path.stat().st_size
        except FileNotFoundError:
            return self.progress
        if size < self.offset:
            self._reset()
        if size == self.offset:
            return self.progress
        with open(self.path, "rb") as f:
            f.seek(self.offset)
            data = f.read(size - self.offset)
        end = data.rfind(b"\n")
        if end < 0:
            return self.progress
        self.offset += end + 1
        progress = self.progress
        for line in data[: end + 1].splitlines():
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except (ValueError, RecursionError):
                continue
            if not isinstance(row, dict):
                continue
            progress.rows += 1
            progress.last = row
            # a hand-edited or damaged value must not take `status` down: numbers only
            step, cum, accuracy = (row.get(k) for k in ("step", "cum_rollouts", "eval/accuracy"))
            if _number(step) and math.isfinite(step):
                progress.step = int(step)
            if _number(cum) and math.isfinite(cum):
                progress.cum_rollouts = int(cum)
            if _number(accuracy):
                progress.accuracy = float(accuracy)
            generated = row.get("step_rollouts")
            if _number(generated) and _number(step) and step >= 1:
                if generated > 0:
                    progress.empty_since = None
                elif progress.empty_since is None:
                    progress.empty_since = int(step)
        if progress.step is not None:
            now = time.monotonic()
            if progress._first_seen is None:
                progress._first_seen = (now, progress.step)
            progress._latest_seen = (now, progress.step)
        return progress
