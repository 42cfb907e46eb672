"""Planning: a validated spec compiled into a job graph with content-hashed, stable job ids."""

from rollcli.plan.graph import HASH_EXCLUDED, Plan, PlannedJob, build_plan, canonical_json, job_id
from rollcli.plan.resources import Resources

__all__ = [
    "HASH_EXCLUDED",
    "Plan",
    "PlannedJob",
    "Resources",
    "build_plan",
    "canonical_json",
    "job_id",
]
