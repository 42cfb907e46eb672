#!/bin/bash
# rollcli: the setup block of every sbatch script (a string.Template; comment lines are dropped).
# Runs in the batch step before srun starts the tasks; keep it to environment settings.
export PYTHONUNBUFFERED=1
export ROLLCLI_RUN_DIR=$run_dir
export ROLLCLI_EXECUTOR=slurm
