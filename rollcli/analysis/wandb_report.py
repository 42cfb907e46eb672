"""``rollcli report --wandb``: a W&B report of a run, built with wandb-workspaces.

The report holds the rollouts-to-target table (Markdown), the report run's figures and speedup
table (:mod:`rollcli.analysis.wandb_results`: the accuracy figure there carries the table's
bootstrap band, the same as ``accuracy.pdf``), then line plots of the train runs of the experiment
(W&B group = experiment) grouped by allocator: the seed mean of the target metric against
cumulative rollouts, reward variance and the zero-variance fraction over steps. The line plots
draw no band of their own: W&B offers min-max, standard deviation or standard error only, none of
them the bootstrap interval every rollcli figure and table uses.
Building the report works offline; saving it needs a W&B login. When there is none, or when job
runs were logged offline, the command says exactly what to run (``wandb login``, ``wandb sync``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rollcli.analysis.analyze import RunAnalysis
from rollcli.analysis.summary import COLUMNS, interval_line, summary_rows, target_line
from rollcli.analysis.tracking import is_logged_in

__all__ = ["WandbReportResult", "build_wandb_report", "publish_wandb_report", "unsynced_runs"]


@dataclass
class WandbReportResult:
    url: str | None
    messages: list[str] = field(default_factory=list)
    report: Any = None


def unsynced_runs(run_dir: Path) -> list[Path]:
    """Offline W&B run folders of the run's jobs that ``wandb sync`` has not uploaded yet."""
    found = []
    for path in sorted(Path(run_dir).glob("jobs/*/wandb/offline-run-*")):
        if path.is_dir() and not any(path.glob("*.wandb.synced")):
            found.append(path)
    return found


def _markdown_table(analysis: RunAnalysis) -> str:
    rows = summary_rows(analysis)
    lines = ["| " + " | ".join(h for _, h in COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    lines += ["| " + " | ".join(r[k] for k, _ in COLUMNS) + " |" for r in rows]
    return "\n".join(lines)


def build_wandb_report(analysis: RunAnalysis, *, entity: str, project: str):
    """The wandb-workspaces Report object (no network until ``save()``)."""
    import wandb_workspaces.reports.v2 as wr

    run = analysis.run
    metric = f"eval/{run.target.metric}"
    runset = wr.Runset(
        entity=entity,
        project=project,
        name=run.experiment,
        filters=f"Group = '{run.wandb_group}' and JobType = 'train'",
        groupby=["config.job.allocator"],
    )

    def line(title: str, x: str, y: str) -> Any:
        return wr.LinePlot(
            title=title,
            x=x,
            y=[y],
            groupby=wr.Config("job.allocator"),
            groupby_aggfunc="mean",
            groupby_rangefunc="none",  # the bootstrap band is the report run's figure
        )

    panels = [
        line(f"{metric} vs cumulative rollouts (seed mean)", "rollouts/cumulative", metric),
        line("reward variance (trained groups)", "Step", "reward/var_trained"),
        line("zero-variance group fraction", "Step", "reward/zero_var_frac"),
        line("tokens per step", "Step", "tokens/step"),
    ]
    report_runs = wr.Runset(
        entity=entity,
        project=project,
        name=f"{run.experiment} report",
        filters=f"Group = '{run.wandb_group}' and JobType = 'report'",
    )
    results = [
        wr.MediaBrowser(title="accuracy (band: the table's bootstrap interval)",
                        media_keys=["figures/accuracy"]),
        wr.WeavePanelSummaryTable(table_name="results/speedups"),
    ]  # fmt: skip
    return wr.Report(
        project=project,
        entity=entity,
        title=f"rollcli: {run.experiment}"[:128],
        description=target_line(analysis),
        blocks=[
            wr.H1(text="Rollouts to target"),
            wr.P(text=target_line(analysis)),
            wr.MarkdownBlock(text=_markdown_table(analysis)),
            wr.P(text=interval_line(analysis)),
            wr.PanelGrid(runsets=[report_runs], panels=results),
            wr.H1(text="Curves"),
            wr.PanelGrid(runsets=[runset], panels=panels),
        ],
    )


def report_url(report: Any) -> str:
    """The saved report's URL (computed locally, as wandb-workspaces does, without an API call)."""
    from wandb.util import api_to_app_url

    base = os.environ.get("WANDB_APP_URL") or api_to_app_url(
        os.environ.get("WANDB_BASE_URL") or "https://api.wandb.ai"
    )
    base = base.rstrip("/")
    title = report.title.replace(" ", "-")
    return f"{base}/{report.entity}/{report.project}/reports/{title}--{report.id}"


def publish_wandb_report(analysis: RunAnalysis) -> WandbReportResult:
    """Build and save the report when logged in; otherwise say what to run. Never raises for a
    missing login: the other report outputs are already written by then."""
    cfg = analysis.run.wandb
    project = str(cfg.get("project") or "rollcli")
    pending = unsynced_runs(analysis.run.run_dir)
    if len(pending) > 3:  # `wandb sync` skips folders it has already uploaded
        sync_hint = f"wandb sync {analysis.run.run_dir}/jobs/*/wandb/offline-run-*"
    else:
        sync_hint = "wandb sync " + " ".join(str(p) for p in pending) if pending else ""
    result = WandbReportResult(url=None)
    if str(cfg.get("mode") or "auto").lower() == "disabled" and not pending:
        result.messages.append(
            "W&B tracking is disabled in this run's spec (tracking.wandb.mode: disabled), so no "
            "run was logged; set tracking.wandb.mode to auto or online to get a W&B report."
        )
        return result
    if not is_logged_in() and not pending:
        result.messages.append(
            "No W&B run was logged: tracking.wandb.mode auto logs only where there is a W&B "
            "login and the host answers. Run `wandb login` before `rollcli run` (or set "
            "tracking.wandb.mode: offline to log files for a later `wandb sync`)."
        )
        return result
    if not is_logged_in():
        steps = ["wandb login"]
        if sync_hint:
            steps.append(sync_hint)
        steps.append(f"rollcli report {analysis.run.run_dir} --wandb")
        result.messages.append(
            "W&B is offline (no API key: WANDB_API_KEY unset and no netrc entry). To publish the "
            "report, run: " + " && ".join(steps)
        )
        return result
    if sync_hint:
        result.messages.append(
            f"{len(pending)} job run(s) were logged offline and are not on W&B yet; upload them "
            f"with: {sync_hint}"
        )
    entity = cfg.get("entity") or os.environ.get("WANDB_ENTITY")
    if not entity:
        import wandb

        entity = wandb.Api().default_entity
    report = build_wandb_report(analysis, entity=str(entity), project=project)
    report.save()
    result.report = report
    result.url = report_url(report)
    return result
