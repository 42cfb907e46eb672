#!/bin/bash

# Parameters
#SBATCH --cpus-per-task=64
#SBATCH --error='/shared/runs/it'"'"'s a "quoted" run/sweep 1/slurm/%j_0_log.err'
#SBATCH --gpus-per-node=8
#SBATCH --job-name=rollcli-verl-2node-train
#SBATCH --nodes=4
#SBATCH --ntasks-per-node=1
#SBATCH --open-mode=append
#SBATCH --output='/shared/runs/it'"'"'s a "quoted" run/sweep 1/slurm/%j_0_log.out'
#SBATCH --partition=h200
#SBATCH --requeue
#SBATCH --signal=USR2@90
#SBATCH --time=2880
#SBATCH --wckey=submitit

# setup
export PYTHONUNBUFFERED=1
export ROLLCLI_RUN_DIR='/shared/runs/it'"'"'s a "quoted" run/sweep 1'
export ROLLCLI_EXECUTOR=slurm
if [ -n "${SLURM_CPUS_PER_TASK:-}" ]; then export SRUN_CPUS_PER_TASK=$SLURM_CPUS_PER_TASK; fi
export ROLLCLI_RAY_PORT=$((20000 + SLURM_JOB_ID % 20000))
export RAY_DEDUP_LOGS=0
ulimit -n 65536 2>/dev/null || true

# command
export SUBMITIT_EXECUTOR=slurm
srun --unbuffered --output '/shared/runs/it'"'"'s a "quoted" run/sweep 1/slurm/%j_%t_log.out' --error '/shared/runs/it'"'"'s a "quoted" run/sweep 1/slurm/%j_%t_log.err' '/opt/rollcli venv/bin/python' -u -m submitit.core._submit '/shared/runs/it'"'"'s a "quoted" run/sweep 1/slurm'
