"""Evaluation: benchmarks (registry + loaders), engines (vLLM, transformers, tiny), graders
(math-verify in a killable pool, a code sandbox), metrics (avg@k, pass@k), the resumable
runner behind ``rollcli eval`` and the eval jobs of a plan (:func:`run_eval_job`). See
docs/eval.md.

Submodules are imported on demand (``rollcli.eval.runner``, ``rollcli.eval.benchmarks``...): this
package imports nothing heavy; ``run_eval_job`` is resolved from :mod:`rollcli.eval.job` on first
access.
"""

from __future__ import annotations

from typing import Any

__all__ = ["run_eval_job"]


def __getattr__(name: str) -> Any:
    if name == "run_eval_job":
        from rollcli.eval.job import run_eval_job

        return run_eval_job
    raise AttributeError(f"module 'rollcli.eval' has no attribute {name!r}")
