"""Planning: a validated spec compiled into a job graph with content-hashed, stable job ids."""

from rollcli.plan.graph import HASH_EXCLUDED, Plan, PlannedJob, build_plan, canonical_json, job_id

__all__ = ["HASH_EXCLUDED", "Plan", "PlannedJob", "build_plan", "canonical_json", "job_id"]
