"""Rows of the job table (``rollcli status`` and the live view of ``rollcli run``).

Reads each job's ``state.json`` and the tail of its ``metrics.jsonl``; renders nothing itself.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.live import Live

from rollcli.cli._render import fmt_int, status_table
from rollcli.store.folders import RunFolder
from rollcli.store.progress import MetricsTail, fmt_eta
from rollcli.store.state import read_state

__all__ = ["JobRows", "LiveView", "LIVE_ROWS"]

LIVE_ROWS = 40  # the live view lists at most this many jobs (running and failed first)


class JobRows:
    """Builds status rows for the jobs of a manifest, reading metrics incrementally."""

    def __init__(self, manifest: dict[str, Any], run_dir: Path) -> None:
        self.run_dir = Path(run_dir)
        self.jobs = manifest["plan"]["jobs"]
        budget = manifest.get("spec", {}).get("budget", {})
        self.steps = budget.get("steps")
        self.tails = {
            j["id"]: MetricsTail(RunFolder(self.run_dir).job(j["id"]).metrics) for j in self.jobs
        }

    def rows(
        self, statuses: dict[str, str] | None = None, limit: int | None = None
    ) -> list[dict[str, Any]]:
        """One row per job; with ``limit`` (and the statuses known), only that many jobs, the
        running and failed ones first, so a live view of a huge run stays cheap."""
        jobs = self.jobs
        if limit is not None and statuses and len(jobs) > limit:
            rank = {"running": 0, "failed": 1, "cancelled": 2, "pending": 3, "done": 4}
            order = sorted(
                range(len(jobs)), key=lambda i: rank.get(statuses.get(jobs[i]["id"], ""), 5)
            )
            jobs = [jobs[i] for i in sorted(order[:limit])]
        out = []
        for job in jobs:
            jid = job["id"]
            state = read_state(RunFolder(self.run_dir).job(jid).path)
            status = (statuses or {}).get(jid, state["status"])
            label = "report" if job["type"] == "report" else f"{job['allocator']}/{job['seed']}"
            if job["type"] == "eval":
                label = f"eval {label}"
            row: dict[str, Any] = {
                "id": jid,
                "job": label,
                "type": job["type"],
                "status": status,
                "attempts": state.get("attempts"),
                "note": "",
            }
            if job["type"] == "train":
                progress = self.tails[jid].read()
                if progress.step is not None:
                    row["step"] = (
                        f"{progress.step}/{self.steps}" if self.steps else str(progress.step)
                    )
                    row["rollouts"] = fmt_int(progress.cum_rollouts)
                    row["accuracy"] = (
                        "-" if progress.accuracy is None else f"{progress.accuracy:.3f}"
                    )
                if status == "running":
                    row["eta"] = fmt_eta(progress.eta_s(self.steps))
            if status in ("failed", "cancelled") and state.get("error_tail"):
                lines = [ln for ln in str(state["error_tail"]).splitlines() if ln.strip()]
                row["note"] = lines[-1][:80] if lines else ""
            out.append(row)
        return out

    def table(self, statuses: dict[str, str] | None = None, limit: int | None = None) -> Any:
        table = status_table(self.rows(statuses, limit))
        if limit is not None and statuses and len(self.jobs) > limit:
            counts: dict[str, int] = {}
            for status in statuses.values():
                counts[status] = counts.get(status, 0) + 1
            table.caption = f"{len(self.jobs)} jobs: " + ", ".join(
                f"{n} {s}" for s, n in sorted(counts.items())
            )
        return table


class LiveView:
    """The live table of ``rollcli run``: one row per job, refreshed on every poll."""

    def __init__(self, manifest: dict[str, Any], run_dir: Path, console: Any) -> None:
        self.rows = JobRows(manifest, run_dir)
        self.console = console
        self.live = Live(console=console, refresh_per_second=4, transient=False, auto_refresh=False)

    def __enter__(self) -> LiveView:
        self.live.__enter__()
        return self

    def update(self, statuses: dict[str, str]) -> None:
        self.live.update(self.rows.table(statuses, limit=LIVE_ROWS), refresh=True)

    def __exit__(self, *exc: object) -> None:
        self.live.__exit__(*exc)  # type: ignore[arg-type]
