#!/bin/bash
# rollcli: added for jobs with nodes > 1 (verl on a Ray cluster spanning the job's $nodes nodes).
# The tasks themselves start Ray (rollcli/launch/ray_bootstrap.py): the task on the first node
# runs the head and the trainer, every other task runs a worker. Ports derive from the job id so
# two jobs sharing a node do not collide.
export ROLLCLI_RAY_PORT=$$((20000 + SLURM_JOB_ID % 20000))
export RAY_DEDUP_LOGS=0
ulimit -n 65536 2>/dev/null || true
