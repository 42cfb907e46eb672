#!/bin/bash
# rollcli: the setup block of every sbatch script (a string.Template; comment lines are dropped).
# Runs in the batch step before srun starts the tasks; keep it to environment settings.
export PYTHONUNBUFFERED=1
export ROLLCLI_RUN_DIR=$run_dir
export ROLLCLI_EXECUTOR=slurm
# Slurm 22.05-23.02 no longer hands --cpus-per-task from sbatch to srun: without this each task
# may get one CPU while Ray, vLLM and the sandbox pool are sized for all of them.
if [ -n "$${SLURM_CPUS_PER_TASK:-}" ]; then export SRUN_CPUS_PER_TASK=$$SLURM_CPUS_PER_TASK; fi
