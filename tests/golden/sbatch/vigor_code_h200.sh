# ===== train-0: 6 job(s)
#!/bin/bash

# Parameters
#SBATCH --array=0-5%6
#SBATCH --cpus-per-task=64
#SBATCH --error=/runs/vigor-code-h200/slurm/%A_%a_0_log.err
#SBATCH --gpus-per-node=8
#SBATCH --job-name=rollcli-vigor-code-h200-train
#SBATCH --mem=800G
#SBATCH --nodes=1
#SBATCH --ntasks-per-node=1
#SBATCH --open-mode=append
#SBATCH --output=/runs/vigor-code-h200/slurm/%A_%a_0_log.out
#SBATCH --partition=h200
#SBATCH --requeue
#SBATCH --signal=USR2@90
#SBATCH --time=2880
#SBATCH --wckey=submitit

# setup
export PYTHONUNBUFFERED=1
export ROLLCLI_RUN_DIR=/runs/vigor-code-h200
export ROLLCLI_EXECUTOR=slurm
if [ -n "${SLURM_CPUS_PER_TASK:-}" ]; then export SRUN_CPUS_PER_TASK=$SLURM_CPUS_PER_TASK; fi

# command
export SUBMITIT_EXECUTOR=slurm
srun --unbuffered --output /runs/vigor-code-h200/slurm/%A_%a_%t_log.out --error /runs/vigor-code-h200/slurm/%A_%a_%t_log.err /opt/rollcli/bin/python -u -m submitit.core._submit /runs/vigor-code-h200/slurm
# ===== report-0: 1 job(s)
#!/bin/bash

# Parameters
#SBATCH --cpus-per-task=1
#SBATCH --dependency=afterany:train-0
#SBATCH --error=/runs/vigor-code-h200/slurm/%j_0_log.err
#SBATCH --job-name=rollcli-vigor-code-h200-report
#SBATCH --no-requeue
#SBATCH --nodes=1
#SBATCH --ntasks-per-node=1
#SBATCH --open-mode=append
#SBATCH --output=/runs/vigor-code-h200/slurm/%j_0_log.out
#SBATCH --partition=h200
#SBATCH --signal=USR2@90
#SBATCH --time=60
#SBATCH --wckey=submitit

# setup
export PYTHONUNBUFFERED=1
export ROLLCLI_RUN_DIR=/runs/vigor-code-h200
export ROLLCLI_EXECUTOR=slurm
if [ -n "${SLURM_CPUS_PER_TASK:-}" ]; then export SRUN_CPUS_PER_TASK=$SLURM_CPUS_PER_TASK; fi

# command
export SUBMITIT_EXECUTOR=slurm
srun --unbuffered --output /runs/vigor-code-h200/slurm/%j_%t_log.out --error /runs/vigor-code-h200/slurm/%j_%t_log.err /opt/rollcli/bin/python -u -m submitit.core._submit /runs/vigor-code-h200/slurm
