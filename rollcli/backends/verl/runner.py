"""The verl train job: prepare inputs, compile overrides, launch verl's trainer, relay metrics.

:func:`run_train_job` is what ``rollcli.jobs.train.run_train_job`` hands a job to when
``backend.kind == "verl"``: with the job's config (CONTRACTS §3), it writes the data
parquets (and, for ``model: tiny``, a tiny model) under ``<job>/verl/``, compiles the verl
overrides (kept in ``<job>/verl/overrides.json``), drops metrics rows newer than the last verl
checkpoint, and runs ``verl.trainer.main_ppo.run_ppo`` with :class:`RollcliTaskRunner`, whose
trainer is :class:`~rollcli.backends.verl.trainer.RollcliPPOTrainer`. The trainer runs in a Ray
actor, so ``stop`` is relayed as a file (the trainer checkpoints and returns at the next step
end) and metrics rows reach ``callbacks`` by tailing ``metrics.jsonl``.
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from rollcli.backends.verl.checkpoint_guard import check_checkpoint_dir
from rollcli.backends.verl.config import TINY_MODEL, VerlConfig
from rollcli.backends.verl.overrides import (
    VerlPaths,
    compile_overrides,
    render_value,
    verl_config_from_mapping,
)
from rollcli.backends.verl.resume import trusted_latest_step
from rollcli.errors import RAY_SLOW_START, RollcliError
from rollcli.store.atomic import atomic_write_json, read_jsonl, rewrite_jsonl
from rollcli.store.folders import JobFolder

__all__ = [
    "run_train_job",
    "prepare_inputs",
    "compose_config",
    "job_overrides",
    "load_job",
    "init_cpu_ray",
]

_TINY_TEXTS = 2000
# a local cluster whose start ran out of Ray's fixed 30 s is started again this many times
LOCAL_RAY_RETRIES = 2


def stop_file(job_dir: Path) -> Path:
    """Created to ask the trainer (in its Ray actor) to checkpoint and return."""
    return JobFolder(job_dir).verl / "STOP"


def load_job(job_dir: Path, job: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The job's config (read from its folder unless given), checked to be a verl job."""
    folder = JobFolder(job_dir)
    job = dict(job) if job is not None else folder.read_config()
    if (job.get("backend") or {}).get("kind") != "verl":
        raise RollcliError(f"{folder.config}: backend.kind is not 'verl'")
    return job


def _eval_samples(evaluation: Mapping[str, Any], suite: Sequence[str]) -> dict[str, int]:
    samples = evaluation.get("samples", 1)
    if isinstance(samples, Mapping):
        return {name: int(samples.get(name, 1)) for name in suite}
    return {name: int(samples) for name in suite}


def prepare_inputs(job_dir: Path, job: Mapping[str, Any], backend: VerlConfig) -> VerlPaths:
    """Write ``<job>/verl/data/{train,val}.parquet`` and the tiny model if needed (idempotent)."""
    from rollcli.backends.verl.data import load_records, prepare_dataset, prepare_eval_suite

    root = JobFolder(job_dir).verl
    train = root / "data" / "train.parquet"
    val = root / "data" / "val.parquet"
    if not train.is_file():
        prepare_dataset(backend.train_data, train, limit=backend.train_max_samples)
    if not val.is_file():
        evaluation = job.get("eval") or {}
        suite = list(evaluation.get("suite") or [])
        if backend.val_data:
            prepare_dataset(backend.val_data, val, split="test", limit=backend.val_max_samples)
        elif suite:
            prepare_eval_suite(
                suite,
                val,
                samples=_eval_samples(evaluation, suite),
                limit=backend.val_max_samples,
                livecodebench=evaluation.get("livecodebench"),
            )
        else:  # verl needs a validation set; with no eval configured it is never generated
            prepare_dataset(backend.train_data, val, split="test", limit=1)
    model = backend.model
    if model == TINY_MODEL:
        from rollcli.backends.verl.tiny_model import build_tiny_model

        _, records = load_records(backend.train_data)
        texts = [f"{q} {a}" for q, a in records[:_TINY_TEXTS]]
        seed = int((job.get("job") or {}).get("seed", 0))
        # vLLM's CPU attention needs head_dim >= 32: 2 heads of 32 instead of 4 of 16
        heads = {"num_heads": 2, "num_kv_heads": 1} if backend.rollout_engine == "vllm" else {}
        model = str(build_tiny_model(root / "model", texts, seed=seed, **heads))
    return VerlPaths(
        model=model,
        tokenizer=backend.tokenizer,
        train_files=str(train),
        val_files=str(val),
        checkpoints=str(JobFolder(job_dir).checkpoints),
    )


def job_overrides(job_dir: Path, job: Mapping[str, Any], paths: VerlPaths) -> list[str]:
    """The compiled overrides plus rollcli's own key (where the task runner finds the job)."""
    lines = compile_overrides(job, paths)
    evaluation = job.get("eval") or {}
    backend = verl_config_from_mapping(job["backend"])
    if not (backend.val_data or evaluation.get("suite")):
        lines += ["trainer.test_freq=-1", "trainer.val_before_train=false"]
    if not any(line.startswith(_RAY_ADDRESS_KEY + "=") for line in lines):
        lines.append(f"{_RAY_ADDRESS_KEY}={render_value(_multinode_ray_address())}")
    return [*lines, f"+rollcli.job_dir={render_value(str(job_dir.resolve()))}"]


_RAY_ADDRESS_KEY = "+ray_kwargs.ray_init.address"


def _multinode_ray_address() -> str:
    """The job's Ray head (set by rollcli.launch.ray_bootstrap on the head node). Never left to
    ray.init(): without an address it joins whatever cluster Ray's address file names."""
    address = os.environ.get("RAY_ADDRESS", "").strip()
    if not address:
        raise RollcliError(
            "a multi-node verl job needs its Ray cluster's address: RAY_ADDRESS is unset. "
            "Run it through rollcli's Slurm executor (launch.executor: slurm), whose Ray "
            "bootstrap starts the cluster and sets it"
        )
    return address


def compose_config(lines: Sequence[str]) -> Any:
    """verl's ``ppo_trainer`` config with the overrides applied (Hydra compose, no job launch)."""
    from hydra import compose, initialize_config_dir
    from verl.trainer import main_ppo

    config_dir = str(Path(main_ppo.__file__).parent / "config")
    with initialize_config_dir(config_dir=config_dir, version_base=None):
        return compose(config_name="ppo_trainer", overrides=list(lines))


def _latest_checkpoint(job_dir: Path) -> int:
    tracker = JobFolder(job_dir).checkpoints / "latest_checkpointed_iteration.txt"
    return int(tracker.read_text().strip()) if tracker.is_file() else 0


def _trim_metrics(job_dir: Path) -> int:
    """Keep the metrics rows the checkpoint covers; returns how many remain."""
    latest = _latest_checkpoint(job_dir)
    path = JobFolder(job_dir).metrics
    rows = [r for r in read_jsonl(path) if latest > 0 and int(r["step"]) <= latest]
    if path.exists():
        rewrite_jsonl(path, rows)
    return len(rows)


class _Relay(threading.Thread):
    """Turns ``stop`` into the stop file and feeds new metrics rows to the callbacks."""

    def __init__(self, job_dir: Path, stop, callbacks, seen: int) -> None:
        super().__init__(daemon=True, name="rollcli-verl-relay")
        self.job_dir, self.stop, self.callbacks, self.seen = job_dir, stop, list(callbacks), seen
        self.done = threading.Event()

    def deliver(self) -> None:
        rows = read_jsonl(JobFolder(self.job_dir).metrics)
        for row in rows[self.seen :]:
            for callback in self.callbacks:
                callback(row)
        self.seen = max(self.seen, len(rows))

    def run(self) -> None:
        while not self.done.wait(0.5):
            if self.stop is not None and self.stop.is_set():
                path = stop_file(self.job_dir)
                path.parent.mkdir(parents=True, exist_ok=True)
                path.touch()
            self.deliver()


def preflight_sandbox(job: Mapping[str, Any]) -> None:
    """Fail the job with one line when it grades code and the code sandbox cannot start here."""
    from rollcli.eval.graders.sandbox.preflight import needs_sandbox, require_sandbox

    need = needs_sandbox(job)
    if need is not None:
        require_sandbox(need)


def preflight_models(job: Mapping[str, Any]) -> None:
    """Offline (``HF_HUB_OFFLINE=1``, set for Slurm jobs): fail with one line when a hub model
    of the job is not in the Hugging Face cache, instead of a download error in every worker."""
    from rollcli.hf_cache import hub_cache_dir, hub_models, missing_models

    if os.environ.get("HF_HUB_OFFLINE", "").strip().lower() not in ("1", "true", "yes"):
        return
    missing = missing_models(hub_models(job["backend"]))
    if missing:
        raise RollcliError(
            f"backend.model: {', '.join(missing)} is not in the Hugging Face cache "
            f"{hub_cache_dir()} on {os.uname().nodename}, which runs offline (HF_HUB_OFFLINE=1): "
            "run `rollcli data prefetch SPEC` on a node with internet, with HF_HOME on a "
            "shared file system"
        )


def _wait_for_devices(needed: int, timeout_s: float = 120.0) -> None:
    """In a Ray cluster shared with an earlier job, wait until its workers released their GPUs.

    verl checks the free GPUs once, immediately; the actors of a job that just ended are torn
    down asynchronously by Ray.
    """
    import time

    import ray

    if not ray.is_initialized():
        return
    deadline = time.monotonic() + timeout_s
    while ray.available_resources().get("GPU", 0) < needed and time.monotonic() < deadline:
        time.sleep(0.5)


def _set_environment(backend: VerlConfig) -> None:
    if backend.device == "cpu":
        from rollcli.backends.verl.cpu_settings import cpu_environment

        os.environ.update(cpu_environment(backend.rollout_engine))
        os.environ.pop("CUDA_VISIBLE_DEVICES", None)
        # registers the cpu platform and hf rollout here too, even if verl was imported already
        import rollcli.backends.verl.cpu_support  # noqa: F401


def retrying_slow_ray_start(start: Callable[[], None]) -> None:
    """Call ``start``, which starts Ray in this process (``ray.init``) and goes on; when it fails
    with Ray's slow-start error (:data:`rollcli.errors.RAY_SLOW_START`) before Ray came up, stop
    what Ray started and call it again, ``LOCAL_RAY_RETRIES`` times at most. Safe for a local
    cluster only: no other node can be joining it (a Slurm job's head is never started here).
    Any other error, or one raised once Ray was up, goes through at once."""
    import ray

    was_up = ray.is_initialized()
    for attempt in range(1 + LOCAL_RAY_RETRIES):
        try:
            start()
            return
        except Exception as error:
            starting = not was_up and not ray.is_initialized()
            if not (starting and RAY_SLOW_START in str(error)) or attempt == LOCAL_RAY_RETRIES:
                raise
            ray.shutdown()
            _stop_stranded_ray_processes()
            print(
                f"rollcli: Ray's local start ran out of its fixed 30 s (a loaded machine); "
                f"starting it again ({attempt + 2} of {1 + LOCAL_RAY_RETRIES})",
                flush=True,
            )


def _stop_stranded_ray_processes() -> None:
    """Stop this process's Ray children (GCS, raylet, reaper): a ``ray.init`` that failed on its
    node start keeps no handle on them, so ``ray.shutdown`` cannot (their agents follow the
    raylet). Linux's /proc; elsewhere they go with this process."""
    me = str(os.getpid())
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            parent = stat.read_text().rsplit(")", 1)[1].split()[1]
            command = (stat.parent / "cmdline").read_bytes()
            if parent == me and b"/ray/" in command:
                os.kill(int(stat.parent.name), signal.SIGKILL)
        except (OSError, IndexError):
            continue  # gone meanwhile, or not ours to stop


def init_cpu_ray(
    num_cpus: int = 8, *, rollout_engine: str = "hf", extra_modules: Sequence[str] = ()
) -> None:
    """Start a private local Ray cluster for CPU jobs (fake GPU, the CPU-path environment).

    ``run_train_job`` starts one itself when Ray is not running; call this first to share one
    cluster between several CPU jobs in one process (tests, the benchmark). Its jobs must use
    ``rollout_engine`` (``vllm``: vLLM's CPU settings in every actor).
    ``extra_modules`` are loaded by verl in every process after rollcli's CPU support (tests).
    """
    import ray

    from rollcli.backends.verl.cpu_settings import cpu_environment

    env = cpu_environment(rollout_engine)
    if extra_modules:
        env["VERL_USE_EXTERNAL_MODULES"] = ",".join(
            [env["VERL_USE_EXTERNAL_MODULES"], *extra_modules]
        )
    os.environ.update(env)
    os.environ.pop("CUDA_VISIBLE_DEVICES", None)
    retrying_slow_ray_start(
        lambda: ray.init(
            address="local",
            num_cpus=num_cpus,
            num_gpus=1,
            include_dashboard=False,
            runtime_env={"env_vars": env},
        )
    )


def run_train_job(
    job_dir: str | Path,
    *,
    job: Mapping[str, Any] | None = None,
    stop: threading.Event | None = None,
    callbacks: Sequence[Callable[[dict], None]] = (),
) -> None:
    """Run (or resume) one verl train job to ``budget.steps``; see the module docstring."""
    job_dir = Path(job_dir).resolve()
    job = load_job(job_dir, job)
    backend = verl_config_from_mapping(job["backend"])
    preflight_sandbox(job)  # before any GPU work: a missing sandbox would grade every code as 0
    preflight_models(job)
    _set_environment(backend)  # before verl is imported: its plugins read the environment
    if backend.device == "cuda":  # fail here, not in every FSDP worker's init_model
        from rollcli.backends.verl.gpu_stack import attention_implementation, check_attention

        check_attention(attention_implementation(backend.device, backend.attention))
    paths = prepare_inputs(job_dir, job, backend)
    lines = job_overrides(job_dir, job, paths)
    atomic_write_json(JobFolder(job_dir).verl / "overrides.json", lines)
    stop_file(job_dir).unlink(missing_ok=True)
    latest = trusted_latest_step(job_dir, int(job["budget"]["steps"]))  # an edited tracker
    if latest:  # verl torch.loads it with weights_only=False: scan it first
        check_checkpoint_dir(JobFolder(job_dir).checkpoints / f"global_step_{latest}")
    seen = _trim_metrics(job_dir)
    config = compose_config(lines)
    _wait_for_devices(int(config.trainer.nnodes) * int(config.trainer.n_gpus_per_node))
    relay = _Relay(job_dir, stop, callbacks, seen)
    relay.start()
    try:
        from verl.trainer.main_ppo import run_ppo

        from rollcli.backends.verl.task_runner import RollcliTaskRunner

        retrying_slow_ray_start(lambda: run_ppo(config, task_runner_class=RollcliTaskRunner))
    finally:
        relay.done.set()
        relay.join()
        relay.deliver()
        stop_file(job_dir).unlink(missing_ok=True)
