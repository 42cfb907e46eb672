"""What must hold before a spec's jobs go to Slurm, checked on the login node at submission.

- the run folder is on a shared file system (:mod:`rollcli.launch.shared_fs`): a folder under
  ``/tmp`` exists once per node, so the jobs would start on an empty folder;
- the hub models the backend names are in the Hugging Face cache when the jobs run offline
  (:mod:`rollcli.hf_cache`; ``rollcli data prefetch SPEC`` fills it).

Each problem is one line naming the spec file and field, and what to do.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

__all__ = ["submission_problems"]


def submission_problems(spec: Any, run_dir: Path, spec_file: str | None = None) -> list[str]:
    """The problems of submitting ``spec``'s jobs to Slurm with ``run_dir`` (empty: none)."""
    from rollcli.hf_cache import hub_cache_dir, hub_models, missing_models, offline_wanted
    from rollcli.launch.shared_fs import ALLOW_ENV, node_local_reason

    where = spec_file or "the spec"
    problems = []
    reason = node_local_reason(run_dir)
    if reason and os.environ.get(ALLOW_ENV) != "1":
        problems.append(
            f"{where}: launch.executor: slurm: the run folder {run_dir} cannot be seen from the "
            f"compute nodes ({reason}); pass --runs-dir on a shared file system (or set "
            f"{ALLOW_ENV}=1 on a one-machine cluster)"
        )
    backend = spec.backend_dict()
    if backend.get("kind") == "verl" and offline_wanted():
        missing = missing_models(hub_models(backend))
        if missing:
            problems.append(
                f"{where}: backend.model: {', '.join(missing)} not in the Hugging Face cache "
                f"{hub_cache_dir()} and Slurm jobs run offline (HF_HUB_OFFLINE=1); fetch it on "
                f"this node first: rollcli data prefetch {spec_file or 'SPEC'} (or set "
                "HF_HUB_OFFLINE=0 where compute nodes have internet)"
            )
    return problems
