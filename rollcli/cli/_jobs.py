"""Rows of the job table (``rollcli status`` and the live view of ``rollcli run``).

Reads each job's ``state.json`` and the tail of its ``metrics.jsonl``; renders nothing itself.
A running job with no step yet shows its log's last line as the note (the tiny backend's
base-model build); the live view adds a progress bar (jobs, train steps, ETA) and, when the output
is no terminal, prints plain lines (one per job that starts or ends) instead of redrawing a table.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rich.console import Group
from rich.live import Live
from rich.progress import BarColumn, Progress, TaskProgressColumn, TextColumn, TimeRemainingColumn

from rollcli.cli._render import fmt_int, job_label, status_table
from rollcli.store.folders import RunFolder
from rollcli.store.progress import MetricsTail, fmt_eta
from rollcli.store.state import read_state

__all__ = ["JobRows", "LiveView", "LIVE_ROWS"]

LIVE_ROWS = 40  # the live view lists at most this many jobs (running and failed first)
ETA_WINDOW_S = 3600.0  # the ETA's step rate is measured over this window (a tiny step takes ~1 s,
# a verl step minutes: rich's default of 30 s would leave a slow run with no estimate)


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
            died = jid not in (statuses or {}) and _died(state, RunFolder(self.run_dir).job(jid))
            if died:
                status = "failed"
            label = job_label(job)
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
                if status == "running" and progress.step is None:
                    row["note"] = _last_log_line(RunFolder(self.run_dir).job(jid))
                if progress.empty_since is not None:  # issue 28: said nowhere before
                    row["note"] = (
                        f"pool drained: nothing generated since step {progress.empty_since}"
                    )
            if died:
                row["note"] = "its process is gone (was `rollcli run` killed?); rerun to resume"
            elif status in ("failed", "cancelled") and state.get("error_tail"):
                lines = [ln for ln in str(state["error_tail"]).splitlines() if ln.strip()]
                row["note"] = lines[-1][:80] if lines else ""
            out.append(row)
        return out

    def totals(self, statuses: dict[str, str]) -> tuple[dict[str, int], int, int]:
        """(jobs per status, train steps done, train steps in all) from the rows' sources."""
        counts: dict[str, int] = {}
        for status in statuses.values():
            counts[status] = counts.get(status, 0) + 1
        train = [j for j in self.jobs if j["type"] == "train"]
        total = (self.steps or 0) * len(train)
        done = 0
        for job in train:
            if statuses.get(job["id"]) == "done" and self.steps:
                done += self.steps
            else:
                done += self.tails[job["id"]].read().step or 0
        return counts, done, total

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


def _died(state: dict[str, Any], folder: Any) -> bool:
    """True for a job whose state says ``running`` but whose local process no longer runs (its
    orchestrator was killed before it could record the end). Only a local job of this host with a
    recorded pid can be told dead; any other job keeps the status its state records."""
    executor = state.get("executor") or {}
    if state["status"] != "running" or executor.get("kind", "local") != "local":
        return False
    if not executor.get("pid") or executor.get("host") not in (None, socket.gethostname()):
        return False
    from rollcli.launch.local import job_process_alive

    return job_process_alive(state, folder.path) is None


def _last_log_line(folder: Any, size: int = 4096) -> str:
    """The last non-empty line of a job's newest log (stdout or stderr), cut to 60 characters."""
    newest = None
    for path in (folder.stdout_log, folder.stderr_log):
        if (
            path.exists()
            and path.stat().st_size
            and (newest is None or path.stat().st_mtime >= newest.stat().st_mtime)
        ):
            newest = path
    if newest is None:
        return ""
    with open(newest, "rb") as handle:
        handle.seek(max(0, newest.stat().st_size - size))
        text = handle.read().decode("utf-8", "replace")
    # a progress bar redraws with carriage returns: the last redraw is the line
    lines = [ln.rsplit("\r", 1)[-1].strip() for ln in text.splitlines()]
    lines = [ln for ln in lines if ln]
    return lines[-1][:60] if lines else ""


def jobs_text(n_jobs: int, counts: dict[str, int]) -> str:
    """``overall: 3/9 jobs done, 2 running``."""
    parts = [f"overall: {counts.get('done', 0)}/{n_jobs} jobs done"]
    parts += [f"{counts[s]} {s}" for s in ("running", "failed", "cancelled") if counts.get(s)]
    return ", ".join(parts)


def overall_line(rows: JobRows, statuses: dict[str, str], eta_s: float | None) -> str:
    """``overall: 3/9 jobs done, 2 running; steps 420/1.2k (35%); eta 2m10s``."""
    return _overall_text(len(rows.jobs), *rows.totals(statuses), eta_s)


def _overall_text(
    n_jobs: int, counts: dict[str, int], done: int, total: int, eta_s: float | None
) -> str:
    line = jobs_text(n_jobs, counts)
    if total:
        line += f"; steps {fmt_int(done)}/{fmt_int(total)} ({100 * done // total}%)"
    if eta_s is not None:
        line += f"; eta {fmt_eta(eta_s)}"
    return line


class LiveView:
    """The live table of ``rollcli run``: one row per job, refreshed on every poll, over a
    ``rich.progress`` bar of the train steps (jobs done, steps, ETA from the step rate of the
    last hour). Not on a terminal: a plain line per job that starts or ends, with the overall
    line and the same ETA."""

    def __init__(
        self,
        manifest: dict[str, Any],
        run_dir: Path,
        console: Any,
        clock: Callable[[], float] | None = None,
    ) -> None:
        self.rows = JobRows(manifest, run_dir)
        self.console = console
        self.plain = not console.is_terminal
        self.live = Live(console=console, refresh_per_second=4, transient=False, auto_refresh=False)
        self._seen: dict[str, str] = {}
        # rich's bar, drawn under the table by our Live (never started on its own); its task's
        # rate also gives the plain lines their ETA
        self.progress = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            TaskProgressColumn(),
            TextColumn("{task.fields[steps]}"),
            TimeRemainingColumn(compact=True),
            console=console,
            auto_refresh=False,
            speed_estimate_period=ETA_WINDOW_S,
            get_time=clock,
        )
        self.steps_task = self.progress.add_task("overall", total=None, steps="")

    def __enter__(self) -> LiveView:
        if not self.plain:
            self.live.__enter__()
        return self

    def _advance(self, counts: dict[str, int], done: int, total: int) -> float | None:
        """Moves the overall bar to the train steps done; the ETA (seconds) rich estimates from
        the step rate over the last hour, or None before two steps have been seen."""
        self.progress.update(
            self.steps_task,
            completed=done,
            total=total or None,
            description=jobs_text(len(self.rows.jobs), counts),
            steps=f"steps {fmt_int(done)}/{fmt_int(total)}" if total else "",
        )
        return self.progress.tasks[0].time_remaining if total else None

    def update(self, statuses: dict[str, str]) -> None:
        totals = self.rows.totals(statuses)  # reads every job's metrics tail: once a poll
        line = _overall_text(len(self.rows.jobs), *totals, self._advance(*totals))
        if self.plain:
            labels = {r["id"]: r["job"] for r in self.rows.rows(statuses, limit=None)}
            for jid, status in statuses.items():
                if self._seen.get(jid) != status and status != "pending":
                    stamp = time.strftime("%H:%M:%S")
                    self.console.print(f"{stamp} {labels.get(jid, jid)} {status}  ({line})")
                self._seen[jid] = status
            return
        self.live.update(
            Group(self.rows.table(statuses, limit=LIVE_ROWS), self.progress), refresh=True
        )

    def __exit__(self, *exc: object) -> None:
        if not self.plain:
            self.live.__exit__(*exc)  # type: ignore[arg-type]
