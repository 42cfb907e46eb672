#!/bin/bash

# Parameters
#SBATCH --account=rl-team
#SBATCH --array=0-11%4
#SBATCH --constraint='h200&ib'
#SBATCH --cpus-per-task=32
#SBATCH --error='/shared/runs/it'"'"'s a "quoted" run/sweep 1/slurm/%A_%a_0_log.err'
#SBATCH --exclusive
#SBATCH --gpus-per-node=8
#SBATCH --job-name=rollcli-pc-vs-grpo-train
#SBATCH --mail-type=END
#SBATCH --mem=512G
#SBATCH --nodes=1
#SBATCH --ntasks-per-node=1
#SBATCH --open-mode=append
#SBATCH --output='/shared/runs/it'"'"'s a "quoted" run/sweep 1/slurm/%A_%a_0_log.out'
#SBATCH --partition=h200
#SBATCH --qos=high
#SBATCH --requeue
#SBATCH --reservation='rl week'
#SBATCH --signal=USR2@90
#SBATCH --time=2880
#SBATCH --wckey=submitit

# setup
export PYTHONUNBUFFERED=1
export ROLLCLI_RUN_DIR='/shared/runs/it'"'"'s a "quoted" run/sweep 1'
export ROLLCLI_EXECUTOR=slurm
if [ -n "${SLURM_CPUS_PER_TASK:-}" ]; then export SRUN_CPUS_PER_TASK=$SLURM_CPUS_PER_TASK; fi

# command
export SUBMITIT_EXECUTOR=slurm
srun --unbuffered --output '/shared/runs/it'"'"'s a "quoted" run/sweep 1/slurm/%A_%a_%t_log.out' --error '/shared/runs/it'"'"'s a "quoted" run/sweep 1/slurm/%A_%a_%t_log.err' '/opt/rollcli venv/bin/python' -u -m submitit.core._submit '/shared/runs/it'"'"'s a "quoted" run/sweep 1/slurm'
