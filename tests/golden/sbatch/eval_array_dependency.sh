#!/bin/bash

# Parameters
#SBATCH --array=0-2%3
#SBATCH --cpus-per-task=1
#SBATCH --dependency=afterany:train-0
#SBATCH --error='/shared/runs/it'"'"'s a "quoted" run/sweep 1/slurm/%A_%a_0_log.err'
#SBATCH --job-name=rollcli-quick-eval
#SBATCH --nodes=1
#SBATCH --ntasks-per-node=1
#SBATCH --open-mode=append
#SBATCH --output='/shared/runs/it'"'"'s a "quoted" run/sweep 1/slurm/%A_%a_0_log.out'
#SBATCH --requeue
#SBATCH --signal=USR2@90
#SBATCH --time=1440
#SBATCH --wckey=submitit

# setup
export PYTHONUNBUFFERED=1
export ROLLCLI_RUN_DIR='/shared/runs/it'"'"'s a "quoted" run/sweep 1'
export ROLLCLI_EXECUTOR=slurm
if [ -n "${SLURM_CPUS_PER_TASK:-}" ]; then export SRUN_CPUS_PER_TASK=$SLURM_CPUS_PER_TASK; fi

# command
export SUBMITIT_EXECUTOR=slurm
srun --unbuffered --output '/shared/runs/it'"'"'s a "quoted" run/sweep 1/slurm/%A_%a_%t_log.out' --error '/shared/runs/it'"'"'s a "quoted" run/sweep 1/slurm/%A_%a_%t_log.err' '/opt/rollcli venv/bin/python' -u -m submitit.core._submit '/shared/runs/it'"'"'s a "quoted" run/sweep 1/slurm'
