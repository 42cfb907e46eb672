"""Rich renderings shared by commands: the plan table, the job status table, a minimal summary.

Pure functions from data to rich renderables (no I/O), so output can be golden-file tested.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from rich.table import Table
from rich.text import Text

from rollcli.text import fmt_count

__all__ = [
    "STATUS_STYLE",
    "fmt_int",
    "fmt_resources",
    "plan_table",
    "plan_summary_table",
    "plan_totals",
    "status_table",
    "minimal_summary_table",
]

STATUS_STYLE = {
    "pending": "dim",
    "running": "cyan",
    "done": "green",
    "failed": "bold red",
    "cancelled": "yellow",
}
MAX_PLAN_ROWS = 200


fmt_int = fmt_count  # one number format for rollouts and tokens (rollcli.text)


def fmt_resources(res: dict[str, Any], executor: str) -> str:
    if executor == "local":
        return f"{res['cpus_per_task']} cpu"
    gpus = res["gpus_per_node"]
    parts = [f"{res['nodes']}x{gpus} gpu" if gpus else f"{res['nodes']} node"]
    if res.get("time"):
        parts.append(res["time"])
    if res.get("partition"):
        parts.append(res["partition"])
    return " ".join(parts)


def job_label(job: dict[str, Any]) -> str:
    """``pc/0``, ``pc/b1/s0`` (seed 0 on base model 1), ``eval pc/0`` or ``report``."""
    if job["type"] == "report":
        return "report"
    seed = job["seed"] if job.get("base_seed") is None else f"b{job['base_seed']}/s{job['seed']}"
    label = f"{job['allocator']}/{seed}"
    return label if job["type"] == "train" else f"eval {label}"


def plan_totals(jobs: list[dict[str, Any]], budgets: list[Any] | None = None) -> dict[str, Any]:
    """Counts of jobs, the trained rollouts (and their tokens), and with ``budgets``
    (:func:`rollcli.plan.budget.allocator_budgets`) the generated range over every train job."""
    train = [j for j in jobs if j["type"] == "train"]
    tokens = [j["expected_tokens"] for j in train]
    totals: dict[str, Any] = {
        "jobs": len(jobs),
        "train": len(train),
        "eval": sum(j["type"] == "eval" for j in jobs),
        "rollouts": sum(j["expected_rollouts"] or 0 for j in train),  # trained
        "tokens": None if any(t is None for t in tokens) else sum(tokens),
    }
    gpu_jobs = [j for j in jobs if j["resources"]["gpus_per_node"]]
    if gpu_jobs:
        from rollcli.launch.sbatch import parse_time_minutes

        # an upper bound: what the time limits reserve (Slurm's default limit where none is set)
        totals["gpu_hours_reserved"] = sum(
            j["resources"]["nodes"]
            * j["resources"]["gpus_per_node"]
            * parse_time_minutes(j["resources"]["time"])
            / 60
            for j in gpu_jobs
        )
    if budgets is not None:
        per = {b.allocator: b for b in budgets}
        ranges = [per[j["allocator"]].generated for j in train]
        highs = [hi for _, hi in ranges]
        totals["generated"] = {
            "min": sum(lo for lo, _ in ranges),
            "max": None if any(h is None for h in highs) else sum(highs),  # type: ignore[misc]
        }
    return totals


def fmt_span(low: int | None, high: int | None) -> str:
    """A generated-rollouts range: ``9.6k`` when exact, ``[19.2k, 192k]``, ``<= 101k`` without
    a floor, ``>= 19.2k`` without a bound."""
    if high is None:
        return f">= {fmt_int(low)}" if low else "?"
    lo, hi = fmt_int(low), fmt_int(high)
    if not low:
        return f"<= {hi}"
    return lo if low == high or lo == hi else f"[{lo}, {hi}]"


def budget_table(budgets: list[Any]) -> Table:
    """Per allocator, one train job's trained and generated rollouts and tokens (``rollcli
    plan``): trained is the budget, equal for all (``<= x`` where the allocator may train less);
    generated the allocator's stated range."""
    table = Table(box=None, pad_edge=False, header_style="bold")
    with_tokens = any(b.tokens is not None for b in budgets)
    names = ["allocator", "kind", "trained", "generated/step", "generated"]
    for name in names + (["tokens"] if with_tokens else []):
        table.add_column(name, justify="left" if name in ("allocator", "kind") else "right")
    for b in budgets:
        row = [
            b.allocator,
            b.kind,
            ("" if b.trained_exact else "<= ") + fmt_int(b.steps * b.trained_per_step),
            fmt_span(b.generated_min_per_step, b.generated_max_per_step),
            fmt_span(*b.generated),
        ]
        if with_tokens:
            row.append("?" if b.tokens is None else fmt_span(*b.tokens))
        table.add_row(*row)
    return table


def plan_table(jobs: list[dict[str, Any]], executor: str) -> Table:
    table = Table(box=None, pad_edge=False, header_style="bold")
    for name, justify in (
        ("id", "left"),
        ("job", "left"),
        ("type", "left"),
        ("after", "right"),
        ("resources", "left"),
        ("trained", "right"),
    ):
        table.add_column(name, justify=justify)  # type: ignore[arg-type]
    for job in jobs:
        deps = job["depends_on"]
        table.add_row(
            job["id"],
            job_label(job),
            job["type"],
            str(len(deps)) if deps else "-",
            fmt_resources(job["resources"], executor),
            fmt_int(job["expected_rollouts"]) if job["expected_rollouts"] else "-",
        )
    return table


def plan_summary_table(jobs: list[dict[str, Any]], executor: str) -> Table:
    """One row per allocator (for plans too long to list job by job)."""
    groups: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for job in jobs:
        groups[job["allocator"] or job["type"]].append(job)
    table = Table(box=None, pad_edge=False, header_style="bold")
    for name in ("allocator", "jobs", "seeds", "resources", "trained"):
        table.add_column(name, justify="left" if name in ("allocator", "resources") else "right")
    for name, group in groups.items():
        totals = plan_totals(group)
        table.add_row(
            name,
            str(len(group)),
            str(len({j["seed"] for j in group if j["seed"] is not None}) or "-"),
            fmt_resources(group[0]["resources"], executor),
            fmt_int(totals["rollouts"]) if totals["rollouts"] else "-",
        )
    return table


def status_table(rows: list[dict[str, Any]]) -> Table:
    table = Table(box=None, pad_edge=False, header_style="bold")
    for name in ("id", "job", "status", "try", "step", "rollouts", "accuracy", "eta", "note"):
        table.add_column(
            name, justify="right" if name in ("try", "step", "rollouts", "accuracy") else "left"
        )
    for row in rows:
        status = row["status"]
        table.add_row(
            row["id"],
            row["job"],
            Text(status, style=STATUS_STYLE.get(status, "")),
            str(row.get("attempts") or "-"),
            row.get("step", "-"),
            row.get("rollouts", "-"),
            row.get("accuracy", "-"),
            row.get("eta", "-"),
            Text(row.get("note", ""), style="red" if status == "failed" else "dim"),
        )
    return table


def minimal_summary_table(finals: dict[str, list[dict[str, Any]]], baseline: str) -> Table:
    """Final accuracy per allocator (mean over seeds) and the rollouts it took; a fallback for
    when ``rollcli.analysis`` is not installed."""
    table = Table(title="final accuracy (mean over seeds)", box=None, header_style="bold")
    for name in ("allocator", "seeds", "accuracy", "rollouts"):
        table.add_column(name, justify="left" if name == "allocator" else "right")
    for name, rows in finals.items():
        accs = [r["eval/accuracy"] for r in rows if r.get("eval/accuracy") is not None]
        rolls = [r.get("cum_rollouts", 0) for r in rows]
        label = f"{name} (baseline)" if name == baseline else name
        table.add_row(
            label,
            str(len(rows)),
            f"{sum(accs) / len(accs):.3f}" if accs else "-",
            fmt_int(sum(rolls) / len(rolls)) if rolls else "-",
        )
    return table
