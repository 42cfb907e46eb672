"""Analysis of run folders: rollouts-to-target speedups with bootstrap intervals, report files and
plots, and Weights & Biases tracking and reports.

Attributes load lazily (PEP 562) so that ``import rollcli.analysis`` costs nothing: numpy loads with
the first analysis call, matplotlib only when plotting and wandb only when tracking.

    from rollcli.analysis import print_summary, load_run, analyze_run, write_report
    print_summary("runs/quickstart")
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = [
    "Bounded",
    "TargetSpec",
    "RunData",
    "load_run",
    "RunAnalysis",
    "analyze_run",
    "print_summary",
    "summary_table",
    "write_report",
    "create_tracker",
]

_ATTRS = {
    "Bounded": "rollcli.analysis.curves",
    "TargetSpec": "rollcli.analysis.load",
    "RunData": "rollcli.analysis.load",
    "load_run": "rollcli.analysis.load",
    "RunAnalysis": "rollcli.analysis.analyze",
    "analyze_run": "rollcli.analysis.analyze",
    "print_summary": "rollcli.analysis.summary",
    "summary_table": "rollcli.analysis.summary",
    "write_report": "rollcli.analysis.report",
    "create_tracker": "rollcli.analysis.tracking",
}


def __getattr__(name: str) -> Any:
    module = _ATTRS.get(name)
    if module is None:
        raise AttributeError(f"module 'rollcli.analysis' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
