"""Job entry points: what every executor runs for a job folder (train, eval, report).

``python -m rollcli.jobs.entry JOB_DIR`` (:func:`rollcli.jobs.entry.run_job`) marks the job's
state, reads its config once (:func:`rollcli.jobs.config.load_job_config`) and runs it by type:
:mod:`rollcli.jobs.train` (the generic loop, or a trainer-driven backend's runner),
:mod:`rollcli.jobs.eval` (verl checkpoints), :mod:`rollcli.jobs.report` (the run's report, or a
sweep's ablation). Executors (``rollcli.launch``) know jobs only as this opaque entry point;
this package sits above train, eval, analysis and backends, and nothing below imports it.
"""

from rollcli.jobs.config import JobConfig, JobConfigError, load_job_config

__all__ = ["JobConfig", "JobConfigError", "load_job_config"]
